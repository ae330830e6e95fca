"""benchmarks/rollout_plans.py, plan_oracle.py and planner_confidence.py (the learning-run
figures in docs/results/qwen-runs/README.md come from them), on hand-made rows whose
answers are worked out in the comments."""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def load(name: str):
    """Import a benchmark script as `python benchmarks/NAME.py` would run it: with
    benchmarks/ on the path, for the scripts' imports of each other."""
    if str(ROOT / "benchmarks") not in sys.path:
        sys.path.insert(0, str(ROOT / "benchmarks"))
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_cheapest_mix_moves_the_least_loss_per_token_first_and_skips_what_breaks_the_floor():
    oracle = load("plan_oracle")
    rows = [  # plan -> (f1, tokens); loss and tokens saved by moving to AG in the comments
        {"AG": (0.0, 300), "R, AG": (0.0, 900)},  # 0 lost, 600 saved: free
        {"AG": (1.0, 300), "R, AG": (0.5, 900)},  # -0.5 lost (a gain), 600 saved
        {"AG": (0.0, 800), "R, AG": (0.4, 900)},  # 0.4 for 100: 0.004 a token
        {"AG": (0.0, 100), "R, AG": (0.6, 900)},  # 0.6 for 800: 0.00075 a token
        {"AG": (0.0, 900), "R, AG": (0.2, 900)},  # saves nothing: never moved
    ]
    # full F1 = 1.7; keep 0.6 -> floor 1.02. Order: the gain, the free one, 0.6/800, then
    # 0.4/100. Gain -> 2.2, free -> 2.2, 0.6 -> 1.6, 0.4 would leave 1.2 >= 1.02: moved too.
    f1, tokens, moved = oracle.cheapest_mix(rows, "AG", "R, AG", 0.6)
    assert moved == 4
    assert f1 == pytest.approx(1.2 / 5)
    assert tokens == pytest.approx((300 + 300 + 800 + 100 + 900) / 5)
    # keep 0.8 -> floor 1.36: after the 0.6 move (1.6) the 0.4 one (1.2) is skipped; a sort
    # by loss alone would have taken the 0.4 one before the 0.6 one
    f1, tokens, moved = oracle.cheapest_mix(rows, "AG", "R, AG", 0.8)
    assert (moved, f1) == (3, pytest.approx(1.6 / 5))
    assert tokens == pytest.approx((300 + 300 + 900 + 100 + 900) / 5)


def test_oracle_summary_breaks_ties_by_the_order_given_and_reports_the_saving():
    oracle = load("plan_oracle")
    rows = [
        {"AG": (0.0, 300), "R, AG": (0.0, 900)},  # tie: AG, listed first
        {"AG": (1.0, 300), "R, AG": (1.0, 900)},  # tie: AG
        {"AG": (0.0, 300), "R, AG": (1.0, 900)},
        {"AG": (0.5, 300), "R, AG": (1.0, 900)},
    ]
    summary = oracle.summarise(rows, ["AG", "R, AG"], 0.8)
    assert summary["AG"] == {"f1": 37.5, "tokens": 300}
    assert summary["R, AG"] == {"f1": 75.0, "tokens": 900}
    assert summary["oracle"] == {"f1": 75.0, "tokens": 600, "plans": {"AG": 2, "R, AG": 2}}
    # floor 0.8 x 3.0 = 2.4: the two ties move, then the 0.5 loss (2.5), not the 1.0 one
    assert summary["cheapest at 80% of R, AG"] == {
        "f1": 62.5,
        "tokens": 450,
        "moved": 3,
        "tokens_saved": "50%",
    }


def test_rollout_plans_counts_questions_whose_samples_chose_two_valid_plans():
    plans = load("rollout_plans")

    def trace(qid, plan, f1, valid=True):
        planner = {"role": "planner", "node_id": 0, "raw": plan, "valid": valid, "reward": -0.1}
        answer = {"role": "AG", "node_id": 0, "reward": f1}
        return {"id": qid, "steps": [planner, answer], "metrics": {"f1": f1}}

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
    assert out["mixed_questions"] == 1  # a; b sampled one plan twice, c one valid plan
    # the reward is the trace's steps summed (-0.1 + f1)
    assert out["on_mixed"] == {
        "AG": {"n": 1, "reward": 0.9, "f1": 1.0},
        "R, AG": {"n": 1, "reward": 0.9, "f1": 1.0},
    }


def test_planner_confidence_reads_the_first_tokens_probability_per_plan_and_dataset():
    confidence = load("planner_confidence")

    def trace(dataset, plan, p, valid=True, logprobs=True):
        planner = {
            "role": "planner",
            "node_id": 0,
            "raw": plan,
            "valid": valid,
            "logprobs": [math.log(p), -0.01] if logprobs else None,
        }
        return {"dataset": dataset, "steps": [planner]}

    traces = [
        trace("nq", "R, AG", 1.0),
        trace("hotpot", "R, AG", 0.5),
        trace("hotpot", "AG", 0.6),
        trace("nq", "X", 0.9, valid=False),
        trace("nq", "AG", 0.9, logprobs=False),
    ]
    out = confidence.summarise(traces)
    assert out["skipped"] == {"invalid": 1, "no logprobs": 1}
    assert out["plans"]["R, AG"] == {
        "n": 2,
        "mean": 0.75,
        "min": 0.5,
        "p10": 0.5,
        "p90": 1.0,
        "max": 1.0,
    }
    assert out["all_plans"]["n"] == 3 and out["all_plans"]["mean"] == 0.7
    assert out["per_dataset"]["nq / R, AG"] == {"n": 1, "mean": 1.0}
    assert out["per_dataset"]["hotpot / AG"] == {"n": 1, "mean": 0.6}


def test_spread_takes_symmetric_percentiles():
    confidence = load("planner_confidence")
    out = confidence.spread([i / 19 for i in range(20)])  # 20 values: p10 the 3rd, p90 the 18th
    assert (out["p10"], out["p90"]) == (round(2 / 19, 3), round(17 / 19, 3))
