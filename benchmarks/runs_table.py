"""One table of several evaluation runs on the same questions, per dataset and overall: EM,
F1, acc, cost per question and the workflow mix; with ``--baseline`` each run's paired
bootstrap F1 difference against that run, per dataset and overall.

    python benchmarks/runs_table.py runs/eval/heldout/{llm-only,vanilla,jade} \\
        --baseline runs/eval/heldout/vanilla \\
        --peer "FlashRAG=runs/eval/heldout/flashrag/rag/predictions.jsonl" > table.md

A run is named by its directory's name. Failed traces count as F1 0 (as in `marag eval`).
``--peer NAME=FILE`` adds a peer's per-question predictions on the same questions (FlashRAG's
``predictions.jsonl``: ``id``, ``pred``, ``golden_answers``), rescored with marag's own
metrics so every row is measured alike, each question labelled with the dataset the runs give
it; the peer's own mean scores are printed beside them. The peer retrieves once and calls the
LLM once per question; its token count is its prompt only.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path

from paired_bootstrap import paired_interval, traces_file

from marag.metrics import score
from marag.types import Trace, read_jsonl

ALL = "all"


@dataclass(frozen=True)
class Scored:
    """One question of one run: its scores, cost and workflow."""

    id: str
    dataset: str
    em: float
    f1: float
    acc: float
    retrievals: float
    llm_calls: float
    tokens: float
    workflow: str


def workflow(t: Trace) -> str:
    if t.status != "ok" or not t.nodes:
        return t.status
    return ",".join(t.nodes[0].workflow) or "-"


def scored(t: Trace) -> Scored:
    return Scored(t.id, t.dataset or "?", t.metrics.get("em", 0.0), t.metrics.get("f1", 0.0),
                  t.metrics.get("acc", 0.0), t.cost.retrieval_calls, t.cost.llm_calls,
                  t.cost.prompt_tokens + t.cost.completion_tokens, workflow(t))


def load(run: Path) -> dict[str, Scored]:
    """A run's traces by question id; the first of a repeated id, as ``marag eval`` keeps."""
    out: dict[str, Scored] = {}
    for t in read_jsonl(traces_file(run), Trace):
        out.setdefault(t.id, scored(t))
    return out


def load_peer(spec: str, datasets: dict[str, str]) -> tuple[str, dict[str, Scored], str]:
    """``NAME=FILE`` of a peer's predictions, rescored with marag's metrics; with the peer's
    own mean EM/F1/acc as a line of text."""
    name, sep, file = spec.partition("=")
    if not sep or not name or not file:
        raise SystemExit(f"--peer {spec!r}: expected NAME=PREDICTIONS.jsonl")
    out: dict[str, Scored] = {}
    own: dict[str, float] = defaultdict(float)
    with open(file, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                p = json.loads(line)
                qid, pred, golds = str(p["id"]), p["pred"], list(p["golden_answers"])
            except (ValueError, KeyError, TypeError) as e:
                raise SystemExit(f"{file}:{lineno}: not a prediction line ({e})") from None
            if qid not in datasets:
                raise SystemExit(f"{file}:{lineno}: question {qid} is not in the runs")
            if qid in out:
                continue
            for m in ("em", "f1", "acc"):
                own[m] += float(p.get(m, 0.0))
            s = score(pred if isinstance(pred, str) else None, golds)
            out[qid] = Scored(qid, datasets[qid], s["em"], s["f1"], s["acc"], 1.0, 1.0,
                              float(p.get("input_tokens", 0)), "standard RAG")
    n = max(len(out), 1)
    note = (f"`{name}` as its own file scores it: EM {100 * own['em'] / n:.1f}, "
            f"F1 {100 * own['f1'] / n:.1f}, acc {100 * own['acc'] / n:.1f} (n = {len(out)}); "
            "the rows above rescore its predictions with marag's metrics.")
    return name, out, note


def by_dataset(rows: dict[str, Scored]) -> dict[str, list[Scored]]:
    groups: dict[str, list[Scored]] = defaultdict(list)
    for t in rows.values():
        groups[t.dataset].append(t)
        groups[ALL].append(t)
    return groups


def check_same(a_name: str, a: dict[str, Scored], b_name: str, b: dict[str, Scored]) -> None:
    """The runs hold the same questions, each labelled with the same dataset."""
    only = sorted(set(a) ^ set(b))
    if only:
        raise SystemExit(f"{a_name} and {b_name} hold different questions ({len(only)} in one "
                         f"only, e.g. {only[0]})")
    other = [q for q in a if a[q].dataset != b[q].dataset]
    if other:
        raise SystemExit(f"{a_name} and {b_name} label question {other[0]} with different "
                         f"datasets ({a[other[0]].dataset!r} vs {b[other[0]].dataset!r})")


def row(name: str, dataset: str, ts: list[Scored]) -> str:
    n = len(ts)

    def mean(field: str) -> float:
        return sum(getattr(t, field) for t in ts) / n

    mix = Counter(t.workflow for t in ts).most_common()
    return (f"| {name} | {dataset} | {n} | {100 * mean('em'):.1f} | {100 * mean('f1'):.1f} | "
            f"{100 * mean('acc'):.1f} | {mean('retrievals'):.2f} | {mean('llm_calls'):.2f} | "
            f"{mean('tokens'):.0f} | {', '.join(f'{k} {100 * v / n:.0f}%' for k, v in mix)} |")


def table(runs: list[Path], baseline: Path | None, samples: int,
          peers: tuple[str, ...] = ()) -> str:
    names = [run.name for run in runs]
    loaded = {run.name: load(run) for run in runs}
    notes = []
    first_rows = loaded[names[0]]
    for spec in peers:
        name, rows, note = load_peer(spec, {q: t.dataset for q, t in first_rows.items()})
        names.append(name)
        loaded[name] = rows
        notes.append(note)
    if len(set(names)) != len(names):
        raise SystemExit(f"two runs share a name ({', '.join(names)}); the table names each "
                         "run by its directory's name or its --peer NAME")
    (first_name, first), *rest = loaded.items()
    for name, ts in rest:
        check_same(first_name, first, name, ts)
    groups = {name: by_dataset(ts) for name, ts in loaded.items()}
    datasets = sorted(k for k in groups[first_name] if k != ALL) + [ALL]
    out = [("| run | dataset | n | EM | F1 | acc | retrievals/q | LLM calls/q | tokens/q | "
           "workflows |"), "|---|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    for ds in datasets:
        out += [row(name, ds, g[ds]) for name, g in groups.items()]
    if notes:
        out += [""] + notes
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
                diffs = [ts[q].f1 - base[q].f1 for q in qs]
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
    ap.add_argument("--peer", action="append", default=[], metavar="NAME=FILE",
                    help="a peer's predictions.jsonl on the same questions (repeatable)")
    args = ap.parse_args()
    print(table(args.runs, args.baseline, args.samples, tuple(args.peer)), end="")


if __name__ == "__main__":
    main()
