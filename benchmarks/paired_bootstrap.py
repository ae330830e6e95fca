"""Paired bootstrap of the F1 difference between two evaluation runs on the same questions.

    python benchmarks/paired_bootstrap.py runs/eval/A runs/eval/B [--samples 10000] [--by-dataset]
        [--level 0.99] [--exclude-ids FILE]
    python benchmarks/paired_bootstrap.py runs/eval/X-on-b,runs/eval/X-on-a runs/eval/Y-all
    python benchmarks/paired_bootstrap.py --holm 0.003 0.04 0.2     # Holm-adjusted p-values

A side given as comma-separated run directories pools their questions (a cross-fitted row:
the fold-A model's run on fold B with the fold-B model's run on fold A); a question may
appear in only one of them.

Prints mean F1 of each, the mean difference A - B and its 95% interval (percentile bootstrap
over questions, seed 0; ``--level`` for another), how many questions each run scores higher
on, and the paired t statistic with its two-sided p-value from the normal reference (the test
that docs/results/qwen-runs/SPLITS.md states; meant for n >= 100 or so). ``--by-dataset``
adds the mean difference and interval per dataset, without a test (those rows are
descriptive). ``--exclude-ids FILE`` leaves out the questions whose ids the file lists (one a
line), for a sensitivity row. ``--holm`` takes the p-values of one family and prints Holm's
step-down adjustment of each, in the order given.
"""

from __future__ import annotations

import argparse
import math
import random
from pathlib import Path

from marag.types import Trace, read_jsonl


def traces_file(run: Path) -> Path:
    """A run directory's traces: ``traces.jsonl``, or ``traces.jsonl.gz`` as committed."""
    for name in ("traces.jsonl", "traces.jsonl.gz"):
        if (run / name).is_file():
            return run / name
    raise SystemExit(f"{run}: no traces.jsonl or traces.jsonl.gz")


def f1s(run: Path) -> dict[str, tuple[float, str]]:
    """Per-question (F1, dataset) of one run directory, or of comma-separated ones pooled."""
    out: dict[str, tuple[float, str]] = {}
    for part in str(run).split(","):
        for t in read_jsonl(traces_file(Path(part)), Trace):
            if t.id in out:
                raise SystemExit(f"{part}: question {t.id} is in two of the pooled runs")
            out[t.id] = (float(t.metrics.get("f1", 0.0)), t.dataset)
    return out


def bootstrap_means(diffs: list[float], samples: int = 10000, seed: int = 0) -> list[float]:
    """The sorted means of ``samples`` seeded resamples (with replacement) of ``diffs``."""
    rng = random.Random(seed)
    return sorted(sum(rng.choice(diffs) for _ in diffs) / len(diffs) for _ in range(samples))


def percentile_interval(means: list[float], level: float) -> tuple[float, float]:
    """The percentile interval at ``level`` of sorted bootstrap means."""
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be between 0 and 1, not {level}")
    samples = len(means)
    cut = int(round((1.0 - level) / 2.0 * samples, 9))  # the draws left out below and above
    return means[cut], means[samples - 1 - cut]


def paired_interval(diffs: list[float], samples: int = 10000, seed: int = 0,
                    level: float = 0.95) -> tuple[float, float, float]:
    """Mean of the paired differences and its percentile-bootstrap interval at ``level``."""
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be between 0 and 1, not {level}")
    lo, hi = percentile_interval(bootstrap_means(diffs, samples, seed), level)
    return sum(diffs) / len(diffs), lo, hi


def paired_t(diffs: list[float]) -> tuple[float, float]:
    """The paired t statistic mean / (sd / sqrt(n)) and its two-sided normal p-value."""
    n = len(diffs)
    if n < 2:
        raise ValueError("a paired t statistic needs at least two differences")
    mean = sum(diffs) / n
    sd = math.sqrt(sum((d - mean) ** 2 for d in diffs) / (n - 1))
    if sd == 0.0:
        return (0.0, 1.0) if mean == 0.0 else (math.copysign(math.inf, mean), 0.0)
    t = mean / (sd / math.sqrt(n))
    return t, math.erfc(abs(t) / math.sqrt(2.0))


def holm(pvalues: list[float]) -> list[float]:
    """Holm's step-down adjusted p-values, in the order given (family-wise error control)."""
    m = len(pvalues)
    order = sorted(range(m), key=lambda i: pvalues[i])
    adjusted = [0.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * pvalues[i]))
        adjusted[i] = running
    return adjusted


def _report(label: str, a: dict[str, float], b: dict[str, float], samples: int,
            level: float, test: bool) -> None:
    ids = sorted(a)
    diffs = [a[i] - b[i] for i in ids]
    mean, lo, hi = paired_interval(diffs, samples, level=level)
    line = (f"{label}difference {mean:+.4f}, {100 * level:g}% interval [{lo:+.4f}, {hi:+.4f}]; "
            f"higher on {sum(d > 0 for d in diffs)}, lower on {sum(d < 0 for d in diffs)}, "
            f"tied on {sum(d == 0 for d in diffs)}")
    if test and len(diffs) >= 2:
        t, p = paired_t(diffs)
        line += f"; paired t {t:.2f}, p {p:.2g}"
    print(line)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("a", nargs="?", type=Path)
    ap.add_argument("b", nargs="?", type=Path)
    ap.add_argument("--samples", type=int, default=10000)
    ap.add_argument("--by-dataset", action="store_true",
                    help="also per dataset (descriptive: no test)")
    ap.add_argument("--level", type=float, default=0.95, help="interval level (0.95)")
    ap.add_argument("--exclude-ids", type=Path, metavar="FILE",
                    help="leave out the questions whose ids this file lists")
    ap.add_argument("--holm", type=float, nargs="+", metavar="P",
                    help="print Holm-adjusted p-values of these and exit")
    args = ap.parse_args()
    if args.holm:
        if args.a is not None:
            ap.error("--holm takes p-values, not run directories")
        if any(not 0.0 <= p <= 1.0 for p in args.holm):
            raise SystemExit("--holm takes p-values between 0 and 1")
        for p, adj in zip(args.holm, holm(args.holm)):
            print(f"p {p:.3g} -> Holm {adj:.3g}")
        return
    if args.a is None or args.b is None:
        ap.error("two run directories (or --holm P ...) are required")
    if not 0.0 < args.level < 1.0:
        ap.error("--level must be between 0 and 1")
    if args.samples < 1:
        ap.error("--samples must be at least 1")
    a, b = f1s(args.a), f1s(args.b)
    ids = sorted(set(a) & set(b))
    if len(ids) != len(a) or len(ids) != len(b):
        raise SystemExit(f"the runs share {len(ids)} questions of {len(a)} and {len(b)}")
    if args.exclude_ids:
        if not args.exclude_ids.is_file():
            raise SystemExit(f"--exclude-ids: {args.exclude_ids} is not a file")
        drop = {line.strip() for line in args.exclude_ids.read_text(encoding="utf-8").splitlines()
                if line.strip()}
        kept = [i for i in ids if i not in drop]
        print(f"--exclude-ids: {len(ids) - len(kept)} of the {len(ids)} questions left out")
        ids = kept
        if len(ids) < 2:
            raise SystemExit("fewer than two questions are left")
    fa = {i: a[i][0] for i in ids}
    fb = {i: b[i][0] for i in ids}
    def name(arg: Path) -> str:  # a pooled argument (dirs joined by commas) names each
        return "+".join(Path(d).name for d in str(arg).split(","))

    print(f"{name(args.a)}: F1 {sum(fa.values()) / len(fa):.4f}   {name(args.b)}: F1 "
          f"{sum(fb.values()) / len(fb):.4f}   n={len(ids)}")
    _report("", fa, fb, args.samples, args.level, test=True)
    if args.by_dataset:
        for ds in sorted({a[i][1] for i in ids}):
            sub = [i for i in ids if a[i][1] == ds]
            sa, sb = {i: fa[i] for i in sub}, {i: fb[i] for i in sub}
            _report(f"  {ds or '?'} (n={len(sub)}, {sum(sa.values()) / len(sub):.4f} vs "
                    f"{sum(sb.values()) / len(sub):.4f}): ", sa, sb, args.samples,
                    args.level, test=False)


if __name__ == "__main__":
    main()
