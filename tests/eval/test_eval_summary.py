"""summarize() on hand-made traces; every expected number below was worked out by hand."""

from __future__ import annotations

import json

import pytest

from marag.eval import load_run, summarize, workflow_type
from marag.types import Cost, Node, Step, Trace, write_jsonl


def _trace(i, dataset, answer, golds, *, status="ok", workflow=None, steps=(), cost=None):
    nodes = [Node(id=0, question=f"q{i}", workflow=workflow)]
    return Trace(id=f"q{i}", question=f"q{i}", method="jade", golden_answers=golds,
                 dataset=dataset, nodes=nodes, answer=answer, status=status,
                 error="LLMError: endpoint down" if status == "failed" else None,
                 steps=[Step(role=r, valid=v) for r, v in steps], cost=cost or Cost())


@pytest.fixture
def traces():
    return [
        # exact after normalisation (article dropped)
        _trace(1, "hotpotqa", "the Eiffel Tower", ["Eiffel Tower"], workflow=["R", "AG"],
               steps=[("planner", True), ("R", True), ("AG", True)],
               cost=Cost(llm_calls=2, prompt_tokens=100, completion_tokens=10,
                         retrieval_calls=1, rounds=1, seconds=1.0, money=0.001)),
        # partial: precision 1/2, recall 1 -> F1 2/3; gold is a substring -> acc 1
        _trace(2, "hotpotqa", "Paris France", ["Paris"], workflow=["QDS"],
               steps=[("planner", True), ("QDS", False), ("AG", True), ("AG", False)],
               cost=Cost(llm_calls=4, prompt_tokens=300, completion_tokens=30,
                         retrieval_calls=2, rounds=3, seconds=3.0, money=0.003)),
        # failed before any answer: scores 0, still counted
        _trace(3, "nq_open", None, ["1999"], status="failed", steps=[("planner", False)],
               cost=Cost(llm_calls=1, prompt_tokens=50, seconds=0.5)),
        # static method (no plan on the root): label is its role pipeline
        _trace(4, "nq_open", "1999", ["in 1999", "1999"], status="budget",
               steps=[("R", True), ("AG", True)],
               cost=Cost(llm_calls=1, prompt_tokens=20, completion_tokens=2,
                         retrieval_calls=1, rounds=1, seconds=0.5)),
    ]


def test_overall_scores_counts_and_ok_only(traces):
    s = summarize(traces)
    assert (s["n"], s["failed"], s["budget"]) == (4, 1, 1)
    assert s["status"] == {"budget": 1, "failed": 1, "ok": 2}
    assert s["em"] == pytest.approx(0.5)
    assert s["f1"] == pytest.approx((1 + 2 / 3 + 0 + 1) / 4)
    assert s["acc"] == pytest.approx(0.75)
    assert s["ok"]["n"] == 3
    assert s["ok"]["em"] == pytest.approx(2 / 3)
    assert s["ok"]["f1"] == pytest.approx(8 / 9)
    assert s["ok"]["acc"] == pytest.approx(1.0)
    assert s["methods"] == {"jade": 4}


def test_cost_means_per_question(traces):
    c = summarize(traces)["cost"]
    assert c == pytest.approx({
        "llm_calls": 2.0, "prompt_tokens": 117.5, "completion_tokens": 10.5,
        "total_tokens": 128.0, "retrieval_calls": 1.0, "rounds": 1.25, "seconds": 1.25,
        "money": 0.001,
    })


def test_role_validity_and_workflow_distribution(traces):
    s = summarize(traces)
    assert s["roles"] == {
        "AG": {"valid": 3, "total": 4, "rate": 0.75},
        "QDS": {"valid": 0, "total": 1, "rate": 0.0},
        "R": {"valid": 2, "total": 2, "rate": 1.0},
        "planner": {"valid": 2, "total": 3, "rate": pytest.approx(2 / 3)},
    }
    assert s["workflows"] == {"R,AG": 2, "QDS": 1, "planner": 1}
    assert list(s["workflows"]) == ["R,AG", "QDS", "planner"]  # most common first
    assert workflow_type(Trace(id="x", question="x", method="vanilla")) == "(none)"
    fallback = _trace(5, "hotpotqa", "x", ["y"], workflow=["R", "AG"],
                      steps=[("planner", False), ("R", True), ("AG", True)])
    assert workflow_type(fallback) == "R,AG (fallback)"
    fallback.steps[0].node_id = 1  # a child's bad plan says nothing about the root's
    assert workflow_type(fallback) == "R,AG"


def test_per_dataset_groups(traces):
    d = summarize(traces)["datasets"]
    assert list(d) == ["hotpotqa", "nq_open"]
    h, n = d["hotpotqa"], d["nq_open"]
    assert (h["n"], h["failed"], h["em"], h["acc"]) == (2, 0, 0.5, 1.0)
    assert h["f1"] == pytest.approx(5 / 6)
    assert h["cost"]["llm_calls"] == 3.0
    assert h["workflows"] == {"QDS": 1, "R,AG": 1}
    assert (n["n"], n["failed"], n["em"], n["f1"], n["acc"]) == (2, 1, 0.5, 0.5, 0.5)
    assert n["ok"] == {"n": 1, "em": 1.0, "f1": 1.0, "acc": 1.0}
    assert n["roles"]["planner"] == {"valid": 0, "total": 1, "rate": 0.0}


def test_scores_are_recomputed_not_trusted(traces):
    traces[0].metrics = {"em": 0.0, "f1": 0.0, "acc": 0.0}  # stale numbers on the trace
    assert summarize(traces)["em"] == pytest.approx(0.5)


def test_empty_run():
    s = summarize([])
    assert s["n"] == 0 and s["f1"] == 0.0 and s["datasets"] == {} and s["workflows"] == {}


def test_summary_recomputes_from_traces_file(tmp_path, traces):
    write_jsonl(tmp_path / "traces.jsonl", traces)
    run = load_run(tmp_path)
    assert run.summary == summarize(traces)
    json.dumps(run.summary)  # metrics.json must be plain JSON
