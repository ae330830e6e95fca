"""How much a training run's rollouts can teach its planner: per iteration, the root plans
sampled, and the questions whose samples chose more than one valid plan: only there do two
samples of one question differ in their plan, so that a reward term tied to the plan (JADE's
retrieval cost between `AG` and `R, AG`) separates samples that saw the same question.

    python benchmarks/rollout_plans.py RUN_DIR [RUN_DIR ...]

RUN_DIR holds `rollouts/iter-*.jsonl[.gz]` (a `marag train` output folder or a committed copy).
Per iteration: traces, the root-plan mix ("invalid": the root call failed), questions with
>= 2 distinct valid plans among their samples, and on those questions the mean trace reward
and F1 of each plan. A last line pools every iteration (a question drawn in two iterations
counts as one question there).
"""

from __future__ import annotations

import argparse
import json
from collections import Counter, defaultdict
from pathlib import Path

from marag.types import iter_jsonl


def root_plan(trace: dict) -> str:
    """The root planner's plan as written ("R, AG"); "invalid" when the root call failed."""
    for step in trace.get("steps", []):
        if step.get("role") == "planner" and step.get("node_id") == 0:
            raw = (step.get("raw") or "").strip()
            return raw if step.get("valid") else "invalid"
    return "none"


def valid_plans(traces: list[dict]) -> set[str]:
    return {root_plan(t) for t in traces} - {"invalid", "none"}


def trace_reward(trace: dict) -> float:
    return sum(float(step.get("reward") or 0.0) for step in trace.get("steps", []))


def read_rollouts(path: Path) -> list[dict]:
    return [row for _, row in iter_jsonl(path)]


def summarise(traces: list[dict]) -> dict:
    plans = Counter(root_plan(t) for t in traces)
    by_question: dict[str, list[dict]] = defaultdict(list)
    for trace in traces:
        by_question[trace["id"]].append(trace)
    mixed = {q: ts for q, ts in by_question.items() if len(valid_plans(ts)) > 1}
    contrast: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for ts in mixed.values():
        for trace in ts:
            if root_plan(trace) in ("invalid", "none"):
                continue
            f1 = float((trace.get("metrics") or {}).get("f1", 0.0))
            contrast[root_plan(trace)].append((trace_reward(trace), f1))
    return {
        "traces": len(traces),
        "questions": len(by_question),
        "plans": dict(plans.most_common()),
        "mixed_questions": len(mixed),
        "on_mixed": {
            plan: {
                "n": len(rows),
                "reward": round(sum(r for r, _ in rows) / len(rows), 3),
                "f1": round(sum(f for _, f in rows) / len(rows), 3),
            }
            for plan, rows in sorted(contrast.items())
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", type=Path)
    args = parser.parse_args()
    for run in args.runs:
        files = sorted((run / "rollouts").glob("iter-*.jsonl*"))
        if not files:
            raise SystemExit(f"{run}: no rollouts/iter-*.jsonl[.gz]")
        pooled: list[dict] = []
        print(f"# {run}")
        for path in files:
            traces = read_rollouts(path)
            pooled.extend(traces)
            print(json.dumps({"iteration": path.name.split(".")[0], **summarise(traces)}))
        print(json.dumps({"iteration": "all", **summarise(pooled)}))


if __name__ == "__main__":
    main()
