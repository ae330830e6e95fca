"""A family of pre-stated comparisons as Markdown: the rows' scores and the paired tests.

    python benchmarks/family_table.py \\
        --row team "trained team" runs/crossfit/team-b-on-a,runs/crossfit/team-a-on-b \\
        --row vanilla "vanilla" runs/crossfit/vanilla-on-a,runs/crossfit/vanilla-on-b \\
        --compare team vanilla "team - vanilla" [--compare ...] [--samples 10000] [--out F.md]

Each ``--row KEY LABEL DIRS`` is one evaluation row: a run directory or comma-separated ones
pooled (a cross-fitted row, as ``paired_bootstrap.py`` takes them). The first table gives each
row's n, F1, EM and accuracy (``marag.eval.summary.summarize`` over the pooled traces), F1 per
dataset (with n in the header), total tokens a question and the workflows its traces ran.
Each ``--compare A B LABEL`` is one comparison of the family, numbered in the order given: the
mean F1 difference A - B in points, its 95% and 99% percentile-bootstrap intervals (one seeded
resampling, ``paired_bootstrap.bootstrap_means``, seed 0), how many questions A scores higher,
lower and the same on, the paired t test's two-sided p and Holm's adjustment over the whole
family (``paired_bootstrap.paired_t`` and ``holm``: the test docs/results/qwen-runs/SPLITS.md
states), from full-precision p-values. The comparisons use each trace's stored F1, as
``paired_bootstrap.py`` does; a row whose stored F1 differs from a fresh score of its answers
is refused, so the two tables always agree. Also refused: rows that do not hold the same
questions, a question in two of a row's directories, fewer than two questions. A row with a
directory that has not finished (no ``metrics.json``) is reported missing, and every
comparison that needs it counts with p = 1 in the Holm step, as the cross-fitting script's
report stage does.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from paired_bootstrap import (
    bootstrap_means,
    holm,
    paired_t,
    percentile_interval,
    traces_file,
)

from marag.eval.summary import summarize
from marag.metrics import score_trace
from marag.types import Trace, read_jsonl

DATASETS = ("nq_open", "hotpotqa", "2wikimultihopqa", "musique")  # the order of the tables


def unfinished(dirs: str) -> list[str]:
    """The run directories of a (pooled) row that have not written ``metrics.json``."""
    return [d for d in dirs.split(",") if not (Path(d) / "metrics.json").is_file()]


def load_row(dirs: str) -> list[Trace]:
    """A row's traces, pooled over its run directories. A question in two of them, an empty
    row, or a trace whose stored F1 differs from a fresh score of its answer (the comparisons
    use the stored ones, as ``paired_bootstrap.py`` does; the rows table re-scores) is
    refused."""
    traces: list[Trace] = []
    seen: set[str] = set()
    for d in dirs.split(","):
        for t in read_jsonl(traces_file(Path(d)), Trace):
            if t.id in seen:
                raise SystemExit(f"{d}: question {t.id} is in two of the pooled runs")
            seen.add(t.id)
            traces.append(t)
    if not traces:
        raise SystemExit(f"{dirs}: no traces")
    stale = [t.id for t in traces
             if abs(float(t.metrics.get("f1", 0.0)) - score_trace(t)["f1"]) > 1e-9]
    if stale:
        raise SystemExit(f"{dirs}: the stored F1 of {len(stale)} traces differs from a fresh "
                         f"score of their answers (first: {stale[0]})")
    return traces


def comparison(a: list[Trace], b: list[Trace], samples: int) -> dict[str, float]:
    """The paired statistics of A - B over their (identical) question sets, in F1 points."""
    fa = {t.id: float(t.metrics.get("f1", 0.0)) for t in a}
    fb = {t.id: float(t.metrics.get("f1", 0.0)) for t in b}
    if set(fa) != set(fb):
        raise SystemExit(f"a comparison's rows hold different questions ({len(fa)} and "
                         f"{len(fb)}, {len(set(fa) & set(fb))} shared)")
    if len(fa) < 2:
        raise SystemExit("a comparison needs at least two questions")
    diffs = [fa[i] - fb[i] for i in sorted(fa)]
    means = bootstrap_means(diffs, samples)  # one seeded resampling for both intervals
    lo95, hi95 = percentile_interval(means, 0.95)
    lo99, hi99 = percentile_interval(means, 0.99)
    _, p = paired_t(diffs)
    return {"n": len(diffs), "diff": 100 * sum(diffs) / len(diffs), "lo95": 100 * lo95,
            "hi95": 100 * hi95, "lo99": 100 * lo99, "hi99": 100 * hi99, "p": p,
            "higher": sum(d > 0 for d in diffs), "lower": sum(d < 0 for d in diffs),
            "tied": sum(d == 0 for d in diffs)}


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _plans(workflows: dict[str, int]) -> str:
    """The three most frequent workflows with their counts, and how many others."""
    text = ", ".join(f"`{w}` {c}" for w, c in list(workflows.items())[:3])
    return text + (f", {len(workflows) - 3} more" if len(workflows) > 3 else "")


def rows_table(rows: list[tuple[str, str, str]], loaded: dict[str, list[Trace]]) -> list[str]:
    """The Markdown rows table (missing rows say so)."""
    sums = {key: summarize(loaded[key]) for key, _, _ in rows if key in loaded}
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
            out.append(f"| {_cell(label)} | missing: {_cell(', '.join(unfinished(dirs)))} has "
                       "not finished |" + " |" * (len(head) - 2))
            continue
        per = [f"{100 * s['datasets'][d]['f1']:.1f}" if d in s["datasets"] else "" for d in names]
        out.append("| " + " | ".join([
            _cell(label), str(s["n"]), f"{100 * s['f1']:.1f}", f"{100 * s['em']:.1f}",
            f"{100 * s['acc']:.1f}", *per, f"{s['cost']['total_tokens']:.0f}",
            _plans(s["workflows"])]) + " |")
    return out


def comparisons_table(loaded: dict[str, list[Trace]], compares: list[tuple[str, str, str]],
                      samples: int) -> list[str]:
    """The Markdown table of the family's comparisons, Holm-adjusted over all of them."""
    stats: list[dict[str, float] | None] = []
    for a, b, _ in compares:
        if a not in loaded or b not in loaded:
            stats.append(None)
            continue
        stats.append(comparison(loaded[a], loaded[b], samples))
    adjusted = holm([s["p"] if s else 1.0 for s in stats])
    head = ("| comparison (F1 points) | n | difference | 95% interval | 99% interval | "
             "higher / lower / tied | p | Holm |")
    out = [head, "|---|---:|---:|---|---|---:|---:|---:|"]
    for k, ((_, _, label), s, adj) in enumerate(zip(compares, stats, adjusted), start=1):
        if s is None:
            out.append(f"| {k}: {_cell(label)} | | missing (counted with p = 1) | | | | 1 "
                       f"| {adj:.2g} |")
            continue
        out.append(
            f"| {k}: {_cell(label)} | {s['n']} | {s['diff']:+.1f} "
            f"| [{s['lo95']:+.1f}, {s['hi95']:+.1f}] | [{s['lo99']:+.1f}, {s['hi99']:+.1f}] "
            f"| {s['higher']} / {s['lower']} / {s['tied']} "
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
    loaded = {}
    for key, label, dirs in rows:  # a missing row is reported, and said here (a typo shows)
        if unfinished(dirs):
            print(f"{label}: {', '.join(unfinished(dirs))} has not finished (no metrics.json)",
                  file=sys.stderr)
        else:
            loaded[key] = load_row(dirs)
    lines = rows_table(rows, loaded)
    if args.compare:
        lines += ["", *comparisons_table(loaded, args.compare, args.samples)]
    text = "\n".join(lines) + "\n"
    if args.out:
        args.out.write_text(text, encoding="utf-8")
        print(f"wrote {args.out}")
    else:
        print(text, end="")


if __name__ == "__main__":
    main()
