"""Seconds per training phase, tokens and throughput of a ``marag train`` run folder.

    python benchmarks/train_phases.py runs/train/jade-A [--from 2]

Reads ``metrics.jsonl`` (seconds per phase, trained tokens) and ``rollouts/`` (the prompt and
response tokens of every trained step, i.e. what each forward/backward pass processed).
Prints a markdown table: median and range over iterations.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

from marag.types import Trace, read_jsonl

PHASES = ("rollout", "score", "logprobs", "advantages", "update", "sync")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("run")
    ap.add_argument("--from", dest="first", type=int, default=1, help="first iteration counted")
    args = ap.parse_args()
    run = Path(args.run)
    import yaml

    from marag.train.trainer import DEFAULT_ROLES

    # read as plain YAML: a run made by an older marag may hold keys this one dropped
    cfg = yaml.safe_load((run / "config.yaml").read_text())
    epochs = int(cfg["train"].get("ppo_epochs", 1))
    roles = set(cfg["train"].get("roles") or DEFAULT_ROLES[cfg["method"]["name"]])
    rows = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines() if x]
    rows = [r for r in rows if r["iteration"] >= args.first]
    cols: dict[str, list[float]] = {p: [] for p in PHASES}
    fwd_tokens, upd_rate = [], []
    for r in rows:
        for p in PHASES:
            cols[p].append(r.get(f"seconds.{p}", 0.0))
        f = run / "rollouts" / f"iter-{r['iteration']:06d}.jsonl"
        if f.is_file():
            traces = read_jsonl(f, Trace)
            tok = sum(s.prompt_tokens + s.completion_tokens for t in traces for s in t.steps
                      if s.is_llm and s.role in roles)
            fwd_tokens.append(tok)
            if r.get("seconds.update"):
                upd_rate.append(epochs * tok / r["seconds.update"])

    def cell(xs: list[float]) -> str:
        return f"{statistics.median(xs):.1f} ({min(xs):.1f}–{max(xs):.1f})" if xs else "–"

    print(f"{run}: iterations {rows[0]['iteration']}–{rows[-1]['iteration']} ({len(rows)})")
    print("| phase | seconds per iteration, median (min–max) |")
    print("|---|---:|")
    for p in PHASES:
        print(f"| {p} | {cell(cols[p])} |")
    print(f"| whole iteration | {cell([r['seconds'] for r in rows])} |")
    print(f"| traces per iteration | {cell([float(r['traces']) for r in rows])} |")
    print(f"| trained transitions | {cell([float(r['transitions']) for r in rows])} |")
    print(f"| trained response tokens | {cell([float(r['trained_tokens']) for r in rows])} |")
    print(f"| prompt+response tokens of trained steps | {cell([float(x) for x in fwd_tokens])} |")
    print(f"| update: prompt+response tokens/s (fwd+bwd, {epochs} PPO epoch(s)) | "
          f"{cell(upd_rate)} |")


if __name__ == "__main__":
    main()
