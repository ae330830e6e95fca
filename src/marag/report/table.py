"""Side-by-side comparison of runs, like the papers' main results table.

Rows are methods: runs of the same method over different datasets merge into one row; two
runs that would put two numbers in the same cell keep separate rows named by run directory.
Columns are EM/F1/Acc per dataset, then cost means per question over the row's traces.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from marag.eval.load import RunData
from marag.eval.run_markdown import md_table, pct
from marag.eval.summary import summarize
from marag.metrics import Scorer
from marag.types import Trace

TABLE_COSTS = {
    "llm_calls": "LLM calls",
    "total_tokens": "tokens",
    "retrieval_calls": "retrievals",
    "rounds": "rounds",
    "seconds": "sec",
    "money": "USD",
}


@dataclass
class Row:
    label: str
    runs: list[RunData] = field(default_factory=list)
    summary: dict[str, Any] = field(default_factory=dict)

    @property
    def traces(self) -> list[Trace]:
        return [t for r in self.runs for t in r.traces]


def group_rows(runs: list[RunData], scorer: Scorer | None = None) -> list[Row]:
    rows: list[Row] = []
    for run in runs:
        label = run.method
        target = next((r for r in rows if r.label == label), None)
        if target is not None and set(run.datasets) & {d for x in target.runs for d in x.datasets}:
            target = None
            label = f"{run.method} ({run.path.name})"
        if target is None:
            target = Row(label)
            rows.append(target)
        target.runs.append(run)
    # a method with several rows: each names its folders, the first as well as the others
    for row in rows:
        if any(r is not row and r.runs[0].method == row.label for r in rows):
            row.label = f"{row.label} ({'+'.join(r.path.name for r in row.runs)})"
    for row in rows:
        row.summary = summarize(row.traces, scorer)
    return rows


def datasets_of(rows: list[Row]) -> list[str]:
    seen: dict[str, None] = {}
    for row in rows:
        for d in row.summary["datasets"]:
            seen.setdefault(d, None)
    return list(seen)


def comparison_table(rows: list[Row]) -> str:
    """Markdown: one row per method, EM/F1/Acc (%) per dataset, then mean costs."""
    datasets = datasets_of(rows)
    header = ["method"]
    for d in datasets:
        header += [f"{d} EM", f"{d} F1", f"{d} Acc"]
    header += ["n", "failed", *TABLE_COSTS.values()]
    body = []
    for row in rows:
        s = row.summary
        cells: list[Any] = [row.label]
        for d in datasets:
            ds = s["datasets"].get(d)
            cells += [pct(ds[m]) if ds else None for m in ("em", "f1", "acc")]
        cells += [s["n"], s["failed"], *[s["cost"][c] for c in TABLE_COSTS]]
        body.append(cells)
    return md_table(header, body)


def validity_table(rows: list[Row]) -> str:
    roles = sorted({r for row in rows for r in row.summary["roles"]})
    body = []
    for row in rows:
        rv = row.summary["roles"]
        body.append([row.label, *[pct(rv[r]["rate"]) if r in rv else None for r in roles]])
    return md_table(["method", *[f"{r} valid %" for r in roles]], body)


def workflow_table(rows: list[Row], top: int = 6) -> str:
    body = []
    for row in rows:
        for d, ds in row.summary["datasets"].items():
            n = max(ds["n"], 1)
            mix = ", ".join(f"{w} {pct(c / n):.0f}%" for w, c in list(ds["workflows"].items())[:top])
            body.append([row.label, d, mix])
    return md_table(["method", "dataset", "workflow types (share of questions)"], body)


def report_markdown(rows: list[Row], plots: list[str]) -> str:
    sources = md_table(["method", "run directories"],
                       [[r.label, ", ".join(str(x.path) for x in r.runs)] for r in rows])
    parts = [
        "# Results",
        "EM / F1 / Acc in %, failed items count as 0. Costs are means per question.",
        comparison_table(rows),
        "## Format validity per role",
        validity_table(rows),
        "## Workflow types",
        workflow_table(rows),
        "## Runs",
        sources,
    ]
    if plots:
        parts += ["## Plots", "\n".join(f"![{p}]({p})" for p in plots)]
    return "\n\n".join(parts) + "\n"
