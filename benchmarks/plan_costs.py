"""What a cost-aware planner could save, from two fixed plans answered on the same questions.

    python benchmarks/plan_costs.py runs/crossfit/plans-b/AG runs/crossfit/plans-b/R-AG \\
        --questions runs/data/splits-cf/fold-b-s320.jsonl

CHEAP and DEAR are two evaluation runs of the same questions, each with one fixed plan (here
`llm-only`, the plan `AG`, and `vanilla`, the plan `R, AG`). Per question type (the questions
file's ``dataset`` and ``type``) it prints both plans' F1 and what taking CHEAP for every
question of that type would change overall: F1 points lost and the share of DEAR's tokens
saved (tokens: the traces' prompt plus completion tokens). Then two bounds for a planner that
chooses between the two plans alone: the per-question oracle (CHEAP wherever it scores at
least DEAR's F1) and the greedy rule over types (types taken in the order of F1 lost per token
saved, as long as the F1 kept stays at or above ``--keep`` of DEAR's). Descriptive: it uses
the answers' F1, which a planner does not see, so both are upper bounds on what the two plans
allow, not a result of any trained planner.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from paired_bootstrap import traces_file

from marag.types import Trace, read_jsonl


def load(run: Path) -> dict[str, Trace]:
    return {t.id: t for t in read_jsonl(traces_file(run), Trace)}


def tokens(t: Trace) -> int:
    return t.cost.prompt_tokens + t.cost.completion_tokens


def analyse(cheap: dict[str, Trace], dear: dict[str, Trace], types: dict[str, str],
            keep: float) -> dict:
    """Per-type rows, the oracle and the greedy type rule (module docstring)."""
    if set(cheap) != set(dear):
        raise SystemExit(f"the runs hold different questions ({len(cheap)} and {len(dear)})")
    if not cheap:
        raise SystemExit("the runs hold no questions")
    ids = sorted(cheap)
    n = len(ids)
    f1 = {i: (float(cheap[i].metrics.get("f1", 0.0)), float(dear[i].metrics.get("f1", 0.0)))
          for i in ids}
    tok = {i: (tokens(cheap[i]), tokens(dear[i])) for i in ids}
    dear_f1 = sum(f[1] for f in f1.values()) / n
    dear_tok = sum(t[1] for t in tok.values()) / n
    groups: dict[str, list[str]] = defaultdict(list)
    for i in ids:
        groups[types.get(i, "unknown")].append(i)
    rows = []
    for name, members in sorted(groups.items()):
        lost = sum(f1[i][1] - f1[i][0] for i in members) / n  # overall F1 change if cheap
        saved = sum(tok[i][1] - tok[i][0] for i in members) / n
        rows.append({"type": name, "n": len(members),
                     "cheap_f1": 100 * sum(f1[i][0] for i in members) / len(members),
                     "dear_f1": 100 * sum(f1[i][1] for i in members) / len(members),
                     "f1_lost": 100 * lost, "tokens_saved": 100 * saved / dear_tok})
    oracle = {i for i in ids if f1[i][0] >= f1[i][1]}
    o_f1 = sum(f1[i][0] if i in oracle else f1[i][1] for i in ids) / n
    o_tok = sum(tok[i][0] if i in oracle else tok[i][1] for i in ids) / n
    chosen, f1_now, tok_now = [], dear_f1, dear_tok
    for r in sorted(rows, key=lambda r: r["f1_lost"] / max(r["tokens_saved"], 1e-9)):
        if r["tokens_saved"] <= 0 or dear_f1 == 0:
            continue
        if f1_now - r["f1_lost"] / 100 < keep * dear_f1:
            break  # the next type in the order would cost more F1 than --keep allows
        chosen.append(r["type"])
        f1_now -= r["f1_lost"] / 100
        tok_now -= r["tokens_saved"] / 100 * dear_tok
    return {"n": n, "dear_f1": 100 * dear_f1, "dear_tokens": dear_tok,
            "cheap_f1": 100 * sum(f[0] for f in f1.values()) / n,
            "cheap_tokens": sum(t[0] for t in tok.values()) / n, "types": rows,
            "oracle": {"cheap_on": len(oracle), "f1": 100 * o_f1,
                       "f1_share": o_f1 / dear_f1 if dear_f1 else None,
                       "tokens_saved": 100 * (1 - o_tok / dear_tok)},
            "types_rule": {"keep": keep, "cheap_types": chosen, "f1": 100 * f1_now,
                           "f1_share": f1_now / dear_f1 if dear_f1 else None,
                           "tokens_saved": 100 * (1 - tok_now / dear_tok)}}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("cheap", type=Path)
    ap.add_argument("dear", type=Path)
    ap.add_argument("--questions", type=Path, required=True,
                    help="the questions file (its dataset and type fields name the types)")
    ap.add_argument("--keep", type=float, default=0.95, help="F1 share the type rule keeps")
    ap.add_argument("--json", action="store_true", help="print the result as JSON")
    args = ap.parse_args(argv)
    if not 0.0 < args.keep <= 1.0:
        ap.error("--keep must be in (0, 1]")
    types = {}
    with open(args.questions, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                q = json.loads(line)
                types[q["id"]] = f"{q.get('dataset', '?')}/{q.get('type') or '-'}"
    out = analyse(load(args.cheap), load(args.dear), types, args.keep)
    if args.json:
        print(json.dumps(out, indent=1))
        return
    print(f"n {out['n']}: {args.cheap.name} F1 {out['cheap_f1']:.1f}, {out['cheap_tokens']:.0f} "
          f"tokens; {args.dear.name} F1 {out['dear_f1']:.1f}, {out['dear_tokens']:.0f} tokens")
    print("| type | n | cheap F1 | dear F1 | cheap for the type: F1 points lost | tokens saved |")
    print("|---|---:|---:|---:|---:|---:|")
    for r in out["types"]:
        print(f"| {r['type']} | {r['n']} | {r['cheap_f1']:.1f} | {r['dear_f1']:.1f} | "
              f"{r['f1_lost']:+.2f} | {r['tokens_saved']:.1f}% |")
    o, t = out["oracle"], out["types_rule"]
    print(f"oracle: cheap on {o['cheap_on']} of {out['n']}, F1 {o['f1']:.1f} "
          f"({100 * o['f1_share']:.0f}% of dear's), {o['tokens_saved']:.0f}% fewer tokens")
    print(f"types rule (keep {100 * t['keep']:.0f}%): cheap on {', '.join(t['cheap_types']) or 'none'}"
          f"; F1 {t['f1']:.1f} ({100 * t['f1_share']:.1f}% of dear's), "
          f"{t['tokens_saved']:.0f}% fewer tokens")


if __name__ == "__main__":
    main()
