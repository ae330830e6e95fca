"""Paired bootstrap of the F1 difference between two evaluation runs on the same questions.

    python benchmarks/paired_bootstrap.py runs/eval/A runs/eval/B [--samples 10000]
    python benchmarks/paired_bootstrap.py runs/eval/X-on-b,runs/eval/X-on-a runs/eval/Y-all

A side given as comma-separated run directories pools their questions (a cross-fitted row:
the fold-A model's run on fold B with the fold-B model's run on fold A); a question may
appear in only one of them.

Prints mean F1 of each, the mean difference A - B and its 95% interval (percentile bootstrap
over questions, seed 0), and how many questions each run scores higher on.
"""

from __future__ import annotations

import argparse
import random
from pathlib import Path

from marag.types import Trace, read_jsonl


def traces_file(run: Path) -> Path:
    """A run directory's traces: ``traces.jsonl``, or ``traces.jsonl.gz`` as committed."""
    for name in ("traces.jsonl", "traces.jsonl.gz"):
        if (run / name).is_file():
            return run / name
    raise SystemExit(f"{run}: no traces.jsonl or traces.jsonl.gz")


def f1s(run: Path) -> dict[str, float]:
    """Per-question F1 of one run directory, or of comma-separated ones pooled."""
    out: dict[str, float] = {}
    for part in str(run).split(","):
        for t in read_jsonl(traces_file(Path(part)), Trace):
            if t.id in out:
                raise SystemExit(f"{part}: question {t.id} is in two of the pooled runs")
            out[t.id] = float(t.metrics.get("f1", 0.0))
    return out


def paired_interval(diffs: list[float], samples: int = 10000,
                    seed: int = 0) -> tuple[float, float, float]:
    """Mean of the paired differences and its 95% percentile-bootstrap interval."""
    rng = random.Random(seed)
    means = sorted(sum(rng.choice(diffs) for _ in diffs) / len(diffs) for _ in range(samples))
    return (sum(diffs) / len(diffs), means[int(0.025 * samples)],
            means[int(0.975 * samples) - 1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("a", type=Path)
    ap.add_argument("b", type=Path)
    ap.add_argument("--samples", type=int, default=10000)
    args = ap.parse_args()
    a, b = f1s(args.a), f1s(args.b)
    ids = sorted(set(a) & set(b))
    if len(ids) != len(a) or len(ids) != len(b):
        raise SystemExit(f"the runs share {len(ids)} questions of {len(a)} and {len(b)}")
    diffs = [a[i] - b[i] for i in ids]
    mean, lo, hi = paired_interval(diffs, args.samples)
    print(f"{args.a.name}: F1 {sum(a.values()) / len(a):.4f}   {args.b.name}: F1 "
          f"{sum(b.values()) / len(b):.4f}   n={len(ids)}")
    print(f"difference {mean:+.4f}, 95% interval [{lo:+.4f}, {hi:+.4f}]; higher on "
          f"{sum(d > 0 for d in diffs)}, lower on {sum(d < 0 for d in diffs)}, "
          f"tied on {sum(d == 0 for d in diffs)}")


if __name__ == "__main__":
    main()
