"""A family of pre-stated comparisons as Markdown: the rows' scores and the paired tests.

    python benchmarks/family_table.py \\
        --row team "trained team" runs/crossfit/team-b-on-a,runs/crossfit/team-a-on-b \\
        --row vanilla "vanilla" runs/crossfit/vanilla-on-a,runs/crossfit/vanilla-on-b \\
        --compare team vanilla "team - vanilla" [--compare ...] [--samples 10000] [--out F.md]

Each ``--row KEY LABEL DIRS`` is one evaluation row: a run directory or comma-separated ones
pooled (a cross-fitted row, as ``paired_bootstrap.py`` takes them). The first table gives each
row's n, F1, EM and accuracy (``marag.eval.summary.summarize`` over the pooled traces), F1 per
dataset (with n in the header) and the workflows its traces ran. Each ``--compare A B LABEL``
is one comparison of the family, numbered in the order given: the mean F1 difference A - B in
points, its 95% and 99% percentile-bootstrap intervals (``paired_bootstrap.paired_interval``,
seed 0), how many questions each side scores higher on, the paired t test's two-sided p and
Holm's adjustment over the whole family (``paired_bootstrap.paired_t`` and ``holm``: the test
docs/results/qwen-runs/SPLITS.md states). A comparison whose rows do not hold the same
questions is refused. A row whose directory has no finished run (no ``metrics.json``) is
reported missing, and every comparison that needs it counts with p = 1 in the Holm step, as
the cross-fitting script's report stage does.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from paired_bootstrap import f1s, holm, paired_interval, paired_t, traces_file

from marag.eval.summary import summarize
from marag.types import Trace, read_jsonl

DATASETS = ("nq_open", "hotpotqa", "2wikimultihopqa", "musique")  # the order of the tables


def finished(dirs: str) -> bool:
    """Whether every run directory of a (pooled) row has written its ``metrics.json``."""
    return all((Path(d) / "metrics.json").is_file() for d in dirs.split(","))


def row_summary(dirs: str) -> dict[str, Any]:
    """``summarize`` over the pooled traces of a row's run directories."""
    traces: list[Trace] = []
    for d in dirs.split(","):
        traces.extend(read_jsonl(traces_file(Path(d)), Trace))
    return summarize(traces)


def comparison(a: dict[str, tuple[float, str]], b: dict[str, tuple[float, str]],
               samples: int) -> dict[str, float]:
    """The paired statistics of A - B over their (identical) question sets, in F1 points."""
    if set(a) != set(b):
        raise SystemExit(f"a comparison's rows hold different questions ({len(a)} and {len(b)}, "
                         f"{len(set(a) & set(b))} shared)")
    diffs = [a[i][0] - b[i][0] for i in sorted(a)]
    mean, lo95, hi95 = paired_interval(diffs, samples, level=0.95)
    _, lo99, hi99 = paired_interval(diffs, samples, level=0.99)
    _, p = paired_t(diffs)
    return {"n": len(diffs), "diff": 100 * mean, "lo95": 100 * lo95, "hi95": 100 * hi95,
            "lo99": 100 * lo99, "hi99": 100 * hi99, "p": p,
            "higher": sum(d > 0 for d in diffs), "lower": sum(d < 0 for d in diffs)}


def _plans(workflows: dict[str, int], n: int) -> str:
    top = list(workflows.items())[:3]
    text = ", ".join(f"`{w}` {c}" for w, c in top)
    return text + (f", {len(workflows) - 3} more" if len(workflows) > 3 else "") if n else ""


def rows_table(rows: list[tuple[str, str, str]]) -> list[str]:
    """The Markdown rows table (missing rows say so)."""
    sums = {key: row_summary(dirs) for key, _, dirs in rows if finished(dirs)}
    names = [d for d in DATASETS if any(d in s["datasets"] for s in sums.values())]
    names += sorted({d for s in sums.values() for d in s["datasets"]} - set(names))

    def n_of(d: str) -> str:
        ns = {s["datasets"][d]["n"] for s in sums.values() if d in s["datasets"]}
        return str(ns.pop()) if len(ns) == 1 else "/".join(str(x) for x in sorted(ns))

    head = ["row", "n", "F1", "EM", "acc", *[f"{d} F1 (n {n_of(d)})" for d in names],
            "tokens/q", "workflows"]
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * 1 + "---:|" * (len(head) - 2) + "---|"]
    for key, label, dirs in rows:
        s = sums.get(key)
        if s is None:
            out.append(f"| {label} | missing: {dirs} has not finished |" + " |" * (len(head) - 2))
            continue
        per = [f"{100 * s['datasets'][d]['f1']:.1f}" if d in s["datasets"] else "" for d in names]
        out.append("| " + " | ".join([
            label, str(s["n"]), f"{100 * s['f1']:.1f}", f"{100 * s['em']:.1f}",
            f"{100 * s['acc']:.1f}", *per, f"{s['cost']['total_tokens']:.0f}",
            _plans(s["workflows"], s["n"])]) + " |")
    return out


def comparisons_table(rows: list[tuple[str, str, str]], compares: list[tuple[str, str, str]],
                      samples: int) -> list[str]:
    """The Markdown table of the family's comparisons, Holm-adjusted over all of them."""
    dirs = {key: d for key, _, d in rows}
    stats: list[dict[str, float] | None] = []
    for a, b, _ in compares:
        if not (finished(dirs[a]) and finished(dirs[b])):
            stats.append(None)
            continue
        fa, fb = f1s(Path(dirs[a])), f1s(Path(dirs[b]))
        stats.append(comparison(fa, fb, samples))
    adjusted = holm([s["p"] if s else 1.0 for s in stats])
    head = ("| comparison (F1 points) | n | difference | 95% interval | 99% interval | "
            "higher / lower | p | Holm |")
    out = [head, "|---|---:|---:|---|---|---:|---:|---:|"]
    for k, ((_, _, label), s, adj) in enumerate(zip(compares, stats, adjusted), start=1):
        if s is None:
            out.append(f"| {k}: {label} | | missing (counted with p = 1) | | | | 1 | {adj:.2g} |")
            continue
        out.append(
            f"| {k}: {label} | {s['n']} | {s['diff']:+.1f} | [{s['lo95']:+.1f}, {s['hi95']:+.1f}] "
            f"| [{s['lo99']:+.1f}, {s['hi99']:+.1f}] | {s['higher']} / {s['lower']} "
            f"| {s['p']:.2g} | {adj:.2g} |")
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--row", nargs=3, action="append", default=[],
                    metavar=("KEY", "LABEL", "DIRS"), help="a row: key, label, run dir(s)")
    ap.add_argument("--compare", nargs=3, action="append", default=[],
                    metavar=("A", "B", "LABEL"), help="a comparison A - B of two rows' keys")
    ap.add_argument("--samples", type=int, default=10000)
    ap.add_argument("--out", type=Path, help="write the Markdown here (else print it)")
    args = ap.parse_args(argv)
    rows = [tuple(r) for r in args.row]
    keys = [r[0] for r in rows]
    if not rows:
        ap.error("at least one --row is required")
    if len(set(keys)) != len(keys):
        ap.error(f"row keys must differ: {keys}")
    for a, b, _ in args.compare:
        for key in (a, b):
            if key not in keys:
                ap.error(f"--compare names {key!r}, which no --row defines ({', '.join(keys)})")
    if args.samples < 1:
        ap.error("--samples must be at least 1")
    for _, label, dirs in rows:  # reported as missing, and said here (a typo shows)
        if not finished(dirs):
            print(f"{label}: {dirs} has not finished (no metrics.json)", file=sys.stderr)
    lines = rows_table(rows)
    if args.compare:
        lines += ["", *comparisons_table(rows, args.compare, args.samples)]
    text = "\n".join(lines) + "\n"
    if args.out:
        args.out.write_text(text, encoding="utf-8")
        print(f"wrote {args.out}")
    else:
        print(text, end="")


if __name__ == "__main__":
    main()
