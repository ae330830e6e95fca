"""benchmarks/adaptive_unanswered.py: the multi-step strategy runs only where it can still
change a silver label (single-hop questions A and B missed), and the labels come out the same
as from a run on every question."""

from __future__ import annotations

import json

import pytest

from marag.train.adaptive_labels import silver_labels
from marag.types import Trace, write_jsonl
from test_benchmark_plan_scripts import load

RECORDS = [{"id": q, "question": f"question {q}?", "golden_answers": ["x"], "dataset": d}
           for q, d in [("n1", "nq_open"), ("n2", "nq_open"), ("h1", "hotpotqa"),
                        ("h2", "hotpotqa"), ("m1", "musique")]]


def _run(method: str, f1: dict[str, float], failed: tuple[str, ...] = ()) -> list[Trace]:
    return [Trace(id=r["id"], question=r["question"], method=method, dataset=r["dataset"],
                  status="failed" if r["id"] in failed else "ok",
                  metrics={"f1": f1.get(r["id"], 0.0)}) for r in RECORDS]


A = _run("llm-only", {"n1": 1.0})
B = _run("vanilla", {"n1": 1.0, "h1": 1.0, "n2": 0.5}, failed=("m1",))


def test_only_single_hop_questions_neither_a_nor_b_answered_are_left_for_c():
    mod = load("adaptive_unanswered")
    # h2 and m1 (multi-hop, unanswered) are C whether or not C answers them
    assert [r["id"] for r in mod.unanswered(RECORDS, A, B)] == ["n2"]
    assert mod.unanswered(RECORDS, A, B, done={"n2"}) == []
    # a partial answer counts at a lower threshold, as sft.min_f1 would
    assert mod.unanswered(RECORDS, A, B, min_f1=0.5) == []


def test_the_labels_are_those_of_a_c_run_on_every_question():
    mod = load("adaptive_unanswered")
    left = {r["id"] for r in mod.unanswered(RECORDS, A, B)}
    for answered in ({"h1", "h2", "n1"}, {"n2", "m1"}, set()):
        c_all = _run("ircot", dict.fromkeys(answered, 1.0))
        c_part = [t for t in c_all if t.id in left]
        part = silver_labels({"A": A, "B": B, "C": c_part})
        full = silver_labels({"A": A, "B": B, "C": c_all})
        # the same labels; only why a multi-hop C is C may differ (bias, or C answered it)
        assert {q: label for q, (label, _) in part.items()} == {
            q: label for q, (label, _) in full.items()}


def test_a_question_without_an_a_or_b_trace_is_refused():
    mod = load("adaptive_unanswered")
    with pytest.raises(ValueError, match="1 questions have no B trace"):
        mod.unanswered(RECORDS, A, B[:-1])


def test_the_command_writes_the_records(tmp_path, capsys):
    mod = load("adaptive_unanswered")
    q = tmp_path / "train.jsonl"
    q.write_text("".join(json.dumps(r) + "\n" for r in RECORDS))
    write_jsonl(tmp_path / "a.jsonl", A)
    write_jsonl(tmp_path / "b.jsonl", B)
    out = tmp_path / "left.jsonl"
    args = [str(q), "--a", str(tmp_path / "a.jsonl"), "--b", str(tmp_path / "b.jsonl"),
            "--out", str(out)]
    # h2 was run but is multi-hop, so no candidate: n2 is still left
    write_jsonl(tmp_path / "c.jsonl", [t for t in _run("ircot", {}) if t.id == "h2"])
    assert mod.main([*args, "--done", str(tmp_path / "c.jsonl")]) == 0
    assert [json.loads(line) for line in out.read_text().splitlines()] == RECORDS[1:2]
    assert "1 of 5 questions left for C (0 already done)" in capsys.readouterr().out
    write_jsonl(tmp_path / "c.jsonl", [t for t in _run("ircot", {}) if t.id in ("n2", "h2")])
    assert mod.main([*args, "--done", str(tmp_path / "c.jsonl")]) == 0
    assert out.read_text() == ""
    assert "0 of 5 questions left for C (1 already done)" in capsys.readouterr().out
