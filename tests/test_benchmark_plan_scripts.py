"""benchmarks/plan_oracle.py and benchmarks/rollout_plans.py: the figures the learning-run
notes quote, on hand-made rows whose answers are worked out below."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def load(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_cheapest_mix_moves_free_questions_first_and_stops_at_the_floor():
    oracle = load("plan_oracle")
    rows = [  # plan -> (f1, tokens)
        {"AG": (0.0, 300), "R, AG": (0.0, 900)},  # both wrong: moving it is free
        {"AG": (1.0, 300), "R, AG": (1.0, 900)},  # both right: free too
        {"AG": (0.0, 300), "R, AG": (1.0, 900)},  # moving it loses 1.0
        {"AG": (0.5, 300), "R, AG": (1.0, 900)},  # loses 0.5
    ]
    # full F1 = 3.0; keep 0.8 -> floor 2.4: the two free moves, then -0.5 (2.5) fits, -1.0 not
    f1, tokens, moved = oracle.cheapest_mix(rows, "AG", "R, AG", 0.8)
    assert moved == 3
    assert f1 == pytest.approx(2.5 / 4)
    assert tokens == pytest.approx((300 * 3 + 900) / 4)
    summary = oracle.summarise(rows, ["AG", "R, AG"], 0.8)
    assert summary["oracle"] == {"f1": 75.0, "tokens": 600, "plans": {"AG": 2, "R, AG": 2}}


def test_rollout_plans_counts_questions_whose_samples_disagree():
    plans = load("rollout_plans")

    def trace(qid, plan, f1, valid=True):
        step = {"role": "planner", "node_id": 0, "raw": plan, "valid": valid, "reward": 0.0}
        answer = {"role": "AG", "node_id": 0, "reward": f1 - (0.1 if "R" in plan else 0.0)}
        return {"id": qid, "steps": [step, answer], "metrics": {"f1": f1}}

    traces = [
        trace("a", "AG", 1.0),
        trace("a", "R, AG", 1.0),
        trace("b", "R, AG", 0.0),
        trace("b", "R, AG", 1.0),
        trace("c", "X", 0.0, valid=False),
        trace("c", "AG", 0.0),
    ]
    out = plans.summarise(traces)
    assert out["plans"] == {"AG": 2, "R, AG": 3, "invalid": 1}
    assert out["mixed_questions"] == 2  # a and c; b sampled one plan twice
    assert out["on_mixed"]["AG"] == {"n": 2, "reward": 0.5, "f1": 0.5}
    assert out["on_mixed"]["R, AG"] == {"n": 1, "reward": 0.9, "f1": 1.0}


def test_planner_confidence_reads_the_first_tokens_probability_per_plan_and_dataset():
    confidence = load("planner_confidence")

    def trace(dataset, plan, logprob, valid=True):
        planner = {
            "role": "planner",
            "node_id": 0,
            "raw": plan,
            "valid": valid,
            "logprobs": [logprob, -0.01],
        }
        return {"dataset": dataset, "steps": [planner]}

    half = -0.6931471805599453  # log 0.5
    traces = [
        trace("nq", "R, AG", 0.0),
        trace("hotpot", "R, AG", half),
        trace("hotpot", "AG", half),
        trace("nq", "X", 0.0, valid=False),
    ]
    out = confidence.summarise(traces)
    assert out["without_logprobs"] == 1
    assert out["plans"]["R, AG"]["n"] == 2
    assert out["plans"]["R, AG"]["mean"] == 0.75
    assert (out["plans"]["R, AG"]["min"], out["plans"]["R, AG"]["max"]) == (0.5, 1.0)
    assert out["per_dataset"]["nq / R, AG"] == {"n": 1, "mean": 1.0}
    assert out["per_dataset"]["hotpot / AG"] == {"n": 1, "mean": 0.5}
