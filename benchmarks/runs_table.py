"""One table of several evaluation runs on the same questions, per dataset and overall: EM,
F1, acc, cost per question and the workflow mix; with ``--baseline`` each run's paired
bootstrap F1 difference against that run, per dataset and overall.

    python benchmarks/runs_table.py runs/eval/heldout/{llm-only,vanilla,jade} \\
        --baseline runs/eval/heldout/vanilla > table.md

A run is named by its directory's name. Failed traces count as F1 0 (as in `marag eval`).
"""

from __future__ import annotations

import argparse
from collections import Counter, defaultdict
from pathlib import Path

from paired_bootstrap import paired_interval, traces_file

from marag.types import Trace, read_jsonl

ALL = "all"


def load(run: Path) -> dict[str, Trace]:
    """A run's traces by question id; the first of a repeated id, as ``marag eval`` keeps."""
    out: dict[str, Trace] = {}
    for t in read_jsonl(traces_file(run), Trace):
        out.setdefault(t.id, t)
    return out


def by_dataset(traces: dict[str, Trace]) -> dict[str, list[Trace]]:
    groups: dict[str, list[Trace]] = defaultdict(list)
    for t in traces.values():
        groups[t.dataset or "?"].append(t)
        groups[ALL].append(t)
    return groups


def check_same(a_name: str, a: dict[str, Trace], b_name: str, b: dict[str, Trace]) -> None:
    """The runs hold the same questions, each labelled with the same dataset."""
    only = sorted(set(a) ^ set(b))
    if only:
        raise SystemExit(f"{a_name} and {b_name} hold different questions ({len(only)} in one "
                         f"only, e.g. {only[0]})")
    other = [q for q in a if a[q].dataset != b[q].dataset]
    if other:
        raise SystemExit(f"{a_name} and {b_name} label question {other[0]} with different "
                         f"datasets ({a[other[0]].dataset!r} vs {b[other[0]].dataset!r})")


def workflow(t: Trace) -> str:
    if t.status != "ok" or not t.nodes:
        return t.status
    return ",".join(t.nodes[0].workflow) or "-"


def row(name: str, dataset: str, ts: list[Trace]) -> str:
    n = len(ts)

    def mean(f: object) -> float:
        return sum(f(t) for t in ts) / n  # type: ignore[operator]

    mix = Counter(workflow(t) for t in ts).most_common()
    return (f"| {name} | {dataset} | {n} | {100 * mean(lambda t: t.metrics.get('em', 0)):.1f} | "
            f"{100 * mean(lambda t: t.metrics.get('f1', 0)):.1f} | "
            f"{100 * mean(lambda t: t.metrics.get('acc', 0)):.1f} | "
            f"{mean(lambda t: t.cost.retrieval_calls):.2f} | "
            f"{mean(lambda t: t.cost.llm_calls):.2f} | "
            f"{mean(lambda t: t.cost.prompt_tokens + t.cost.completion_tokens):.0f} | "
            f"{', '.join(f'{k} {100 * v / n:.0f}%' for k, v in mix)} |")


def table(runs: list[Path], baseline: Path | None, samples: int) -> str:
    names = [run.name for run in runs]
    if len(set(names)) != len(names):
        raise SystemExit(f"two runs share a directory name ({', '.join(names)}); the table "
                         "names each run by it")
    loaded = {run.name: load(run) for run in runs}
    (first_name, first), *rest = loaded.items()
    for name, ts in rest:
        check_same(first_name, first, name, ts)
    groups = {name: by_dataset(ts) for name, ts in loaded.items()}
    datasets = sorted(k for k in groups[first_name] if k != ALL) + [ALL]
    out = [("| run | dataset | n | EM | F1 | acc | retrievals/q | LLM calls/q | tokens/q | "
           "workflows |"), "|---|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    for ds in datasets:
        out += [row(name, ds, g[ds]) for name, g in groups.items()]
    if baseline is not None:
        base = load(baseline)
        check_same(first_name, first, f"the baseline {baseline}", base)
        out += ["", (f"Paired bootstrap of the F1 difference against `{baseline.name}` "
                f"(95% percentile interval over questions, {samples} resamples, seed 0):"), "",
                "| run | dataset | n | F1 difference | 95% interval | higher / lower / tied |",
                "|---|---|---:|---:|---|---|"]
        for name, ts in loaded.items():
            if name == baseline.name and ts == base:
                continue
            for ds in datasets:
                qs = [t.id for t in groups[name][ds]]
                diffs = [ts[q].metrics.get("f1", 0.0) - base[q].metrics.get("f1", 0.0)
                         for q in qs]
                mean, lo, hi = paired_interval(diffs, samples)
                out.append(f"| {name} | {ds} | {len(qs)} | {100 * mean:+.1f} | "
                           f"[{100 * lo:+.1f}, {100 * hi:+.1f}] | {sum(d > 0 for d in diffs)} / "
                           f"{sum(d < 0 for d in diffs)} / {sum(d == 0 for d in diffs)} |")
    return "\n".join(out) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", type=Path, nargs="+")
    ap.add_argument("--baseline", type=Path)
    ap.add_argument("--samples", type=int, default=10000)
    args = ap.parse_args()
    print(table(args.runs, args.baseline, args.samples), end="")


if __name__ == "__main__":
    main()
