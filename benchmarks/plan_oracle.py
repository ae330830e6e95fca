"""What a cost-aware planner could gain at best: per question, the plans' greedy runs side by
side, and a planner that knew every answer in advance.

    python benchmarks/plan_oracle.py "AG=DIR" "R, AG=DIR" [--planner-tokens N] [--keep 0.95]

Each DIR is a `marag eval` output (traces.jsonl[.gz]) of one fixed plan over the same
questions (e.g. `llm-only` for `AG`, `vanilla` for `R, AG`). The first plan named is the
cheapest. Printed, pooled and per dataset:
- each plan alone: F1 and tokens a question (the planner's own call, `--planner-tokens`,
  added to every plan, as in `jade`);
- the oracle: per question the best F1; among plans that tie, the one listed first (list the
  cheapest first);
- a cheap mix at >= `--keep` of the last plan's F1: questions move from the last plan listed
  to the first in the order of least F1 lost per token saved, knowing the answers (a greedy
  knapsack: close to, and never above, the most a planner could save at that F1 on these
  questions; plans between the first and the last are not used).
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path

from paired_bootstrap import traces_file

from marag.types import iter_jsonl


def read_traces(folder: Path) -> dict[str, dict]:
    return {row["id"]: row for _, row in iter_jsonl(traces_file(folder))}


def tokens(trace: dict) -> int:
    cost = trace.get("cost") or {}
    return int(cost.get("prompt_tokens", 0)) + int(cost.get("completion_tokens", 0))


def f1(trace: dict) -> float:
    return float((trace.get("metrics") or {}).get("f1", 0.0))


def cheapest_mix(
    rows: list[dict[str, tuple[float, int]]], cheap: str, full: str, keep: float
) -> tuple[float, float, int]:
    """(F1, tokens) a question of the mix that moves questions from `full` to `cheap`, least
    F1 lost per token saved first, while the mean F1 stays >= keep x `full`'s; and how many
    moved. Pure: rows map plan -> (f1, tokens) per question."""
    n = len(rows)
    total_f1 = sum(r[full][0] for r in rows)
    total_tokens = sum(r[full][1] for r in rows)
    floor = keep * total_f1
    moves = sorted(
        ((r[full][0] - r[cheap][0], r[full][1] - r[cheap][1]) for r in rows),
        key=lambda m: (m[0] / m[1] if m[1] > 0 else float("inf"), m[0]),
    )
    moved = 0
    for loss, saved in moves:
        if saved <= 0 or total_f1 - loss < floor - 1e-9:
            continue
        total_f1 -= loss
        total_tokens -= saved
        moved += 1
    return total_f1 / n, total_tokens / n, moved


def summarise(rows: list[dict[str, tuple[float, int]]], plans: list[str], keep: float) -> dict:
    n = len(rows)
    out: dict = {"n": n}
    for plan in plans:
        out[plan] = {
            "f1": round(100 * sum(r[plan][0] for r in rows) / n, 1),
            "tokens": round(sum(r[plan][1] for r in rows) / n),
        }
    oracle_f1 = oracle_tokens = 0.0
    chosen: dict[str, int] = defaultdict(int)
    for r in rows:
        best = max(r[p][0] for p in plans)
        pick = next(p for p in plans if r[p][0] == best)  # plans listed cheapest first
        chosen[pick] += 1
        oracle_f1 += best
        oracle_tokens += r[pick][1]
    out["oracle"] = {
        "f1": round(100 * oracle_f1 / n, 1),
        "tokens": round(oracle_tokens / n),
        "plans": dict(chosen),
    }
    mix_f1, mix_tokens, moved = cheapest_mix(rows, plans[0], plans[-1], keep)
    full_tokens = sum(r[plans[-1]][1] for r in rows) / n
    out[f"cheapest at {keep:.0%} of {plans[-1]}"] = {
        "f1": round(100 * mix_f1, 1),
        "tokens": round(mix_tokens),
        "moved": moved,
        "tokens_saved": f"{1 - mix_tokens / full_tokens:.0%}" if full_tokens else None,
    }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("plans", nargs="+", help="PLAN=DIR, cheapest plan first")
    parser.add_argument(
        "--planner-tokens",
        type=int,
        default=0,
        help="tokens of the planner's call, added to every plan",
    )
    parser.add_argument("--keep", type=float, default=0.95)
    args = parser.parse_args()
    named = [item.split("=", 1) for item in args.plans]
    if len(named) < 2 or any(len(pair) != 2 for pair in named):
        raise SystemExit("give two or more PLAN=DIR, cheapest first")
    plans = [name.strip() for name, _ in named]
    runs = {name.strip(): read_traces(Path(folder)) for name, folder in named}
    common = set.intersection(*(set(run) for run in runs.values()))
    if not common:
        raise SystemExit("the runs share no question ids")
    by_dataset: dict[str, list] = defaultdict(list)
    for qid in sorted(common):
        row = {p: (f1(runs[p][qid]), tokens(runs[p][qid]) + args.planner_tokens) for p in plans}
        by_dataset[runs[plans[0]][qid].get("dataset") or "?"].append(row)
    everything = [row for rows in by_dataset.values() for row in rows]
    print(json.dumps({"dataset": "all", **summarise(everything, plans, args.keep)}))
    for dataset, rows in sorted(by_dataset.items()):
        print(json.dumps({"dataset": dataset, **summarise(rows, plans, args.keep)}))


if __name__ == "__main__":
    main()
