"""How sure a planner is of its greedy root plan, question by question: the probability of the
plan's first token, from the logprobs a greedy `marag eval` (or a training run's checkpoint
evaluation) records in its traces. A planner that decides per question spreads these
probabilities; one that learnt a prior gives every question the same one.

    python benchmarks/planner_confidence.py NAME=EVAL_DIR [NAME=EVAL_DIR ...]

EVAL_DIR holds traces.jsonl[.gz]. Per run: the greedy root plans, and per greedy plan the
mean, min, 10th/90th percentile and max of p(first token) over the questions, overall and
per dataset. For a planner choosing between `R, AG` and `AG` (first tokens "R" and "AG"),
p(first token) of an `R, AG` question is its probability of retrieving first. Plans that
share a first token (QDS and QDP both start with "Q") share that probability, so for them it
is not the plan's own.
"""

from __future__ import annotations

import argparse
import json
import math
from collections import defaultdict
from pathlib import Path

from paired_bootstrap import traces_file

from marag.types import iter_jsonl


def root_choice(trace: dict) -> tuple[str, float] | str:
    """(greedy root plan, probability of its first token); or why not: "invalid" (the root
    call failed), "no logprobs" (the run did not record them), "no planner"."""
    for step in trace.get("steps", []):
        if step.get("role") == "planner" and step.get("node_id") == 0:
            if not step.get("valid"):
                return "invalid"
            logprobs = step.get("logprobs") or []
            if not logprobs:
                return "no logprobs"
            return (step.get("raw") or "").strip(), math.exp(logprobs[0])
    return "no planner"


def spread(values: list[float]) -> dict:
    values = sorted(values)
    n = len(values)
    return {
        "n": n,
        "mean": round(sum(values) / n, 3),
        "min": round(values[0], 3),
        "p10": round(values[n // 10], 3),
        "p90": round(values[n - 1 - n // 10], 3),
        "max": round(values[-1], 3),
    }


def summarise(traces: list[dict]) -> dict:
    by_plan: dict[str, list[float]] = defaultdict(list)
    by_dataset: dict[tuple[str, str], list[float]] = defaultdict(list)
    skipped: dict[str, int] = defaultdict(int)
    pooled: list[float] = []
    for trace in traces:
        choice = root_choice(trace)
        if isinstance(choice, str):
            skipped[choice] += 1
            continue
        plan, p = choice
        by_plan[plan].append(p)
        pooled.append(p)
        by_dataset[(trace.get("dataset") or "?", plan)].append(p)
    return {
        "questions": len(traces),
        "skipped": dict(skipped),
        "all_plans": spread(pooled) if pooled else None,
        "plans": {plan: spread(ps) for plan, ps in sorted(by_plan.items())},
        "per_dataset": {
            f"{dataset} / {plan}": {"n": len(ps), "mean": round(sum(ps) / len(ps), 3)}
            for (dataset, plan), ps in sorted(by_dataset.items())
        },
    }


def read_traces(folder: Path) -> list[dict]:
    return [row for _, row in iter_jsonl(traces_file(folder))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", help="NAME=EVAL_DIR")
    args = parser.parse_args()
    for item in args.runs:
        name, sep, folder = item.partition("=")
        if not sep:
            raise SystemExit(f"{item!r}: give NAME=EVAL_DIR")
        print(json.dumps({"run": name, **summarise(read_traces(Path(folder)))}))


if __name__ == "__main__":
    main()
