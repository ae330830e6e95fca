"""PNG plots for a comparison report (matplotlib, Agg backend, imported on use).

- ``f1_vs_cost.png``: F1 against each cost metric, one labelled point per method and dataset.
- ``f1_vs_cost_all.png``: the same with the datasets every run has pooled, one labelled point
  per method (every run and baseline on one plot).
- ``workflows.png``: workflow-type shares per method, one stacked-bar panel per dataset.
- ``role_validity.png``: format-valid rate per role, one bar per method.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from marag.report.table import Row, datasets_of

PLOT_COSTS = {
    "total_tokens": "tokens / question",
    "llm_calls": "LLM calls / question",
    "retrieval_calls": "retrieval calls / question",
    "rounds": "rounds / question",
    "seconds": "seconds / question",
    "money": "USD / question",
}
MAX_WORKFLOW_TYPES = 9
# Retrieval steps are recorded under role "R" and are always well-formed; plotting their
# validity would only add a constant bar.
RETRIEVAL_ROLE = "R"


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def common_datasets(rows: list[Row]) -> list[str]:
    """The datasets every row has questions of."""
    return [d for d in datasets_of(rows) if all(d in r.summary["datasets"] for r in rows)]


def pooled_summaries(rows: list[Row]) -> list[dict[str, Any]]:
    """Each row's summary over the datasets every row has, so pooled points compare the
    same kinds of questions (a run that also covers a harder dataset is not pulled down
    against one that does not); the row's own summary when they all cover the same ones."""
    from marag.eval.summary import summarize

    common = common_datasets(rows)
    if all(list(r.summary["datasets"]) == common for r in rows):
        return [r.summary for r in rows]
    return [summarize(t for t in r.traces if (t.dataset or "unknown") in common)
            for r in rows]


def cost_points(rows: list[Row], cost: str, dataset: str | None = None
                ) -> dict[tuple[float, float], list[str]]:
    """(mean ``cost`` per question, F1 in %) -> the labels of the rows at that point, over one
    dataset or, with ``dataset=None``, pooled over the datasets every row has
    (``pooled_summaries``). Rows that land on the same point (jade and mao-arag share
    executors) share one entry, so they get one joint label."""
    summaries = (pooled_summaries(rows) if dataset is None
                 else [r.summary["datasets"].get(dataset) for r in rows])
    points: dict[tuple[float, float], list[str]] = {}
    for row, s in zip(rows, summaries, strict=True):
        if s and s.get("n"):
            key = (round(s["cost"][cost], 9), round(100 * s["f1"], 9))
            points.setdefault(key, []).append(row.label)
    return points


class _LabelSpacer:
    """Lifts a point's label above the labels of points already drawn close to it (within 3%
    of the panel's ranges), so near neighbours stay readable."""

    def __init__(self, points: list[tuple[float, float]]) -> None:
        xs, ys = [p[0] for p in points] or [0.0], [p[1] for p in points] or [0.0]
        self.dx = 0.03 * ((max(xs) - min(xs)) or 1.0)
        self.dy = 0.03 * ((max(ys) - min(ys)) or 1.0)
        self.done: list[tuple[float, float]] = []

    def crowd(self, x: float, y: float) -> int:
        n = sum(abs(x - a) <= self.dx and abs(y - b) <= self.dy for a, b in self.done)
        self.done.append((x, y))
        return n


def plot_f1_vs_cost(rows: list[Row], path: Path, pooled: bool = False) -> Path:
    """One panel per cost metric; a point per method and dataset, or per method with
    ``pooled`` (every dataset's questions together)."""
    plt = _pyplot()
    groups: list[str | None] = [None] if pooled else list(datasets_of(rows))
    costs = [c for c in PLOT_COSTS
             if c != "money" or any(r.summary["cost"]["money"] for r in rows)]
    ncols = 3 if len(costs) > 4 else 2
    nrows = math.ceil(len(costs) / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(5.2 * ncols, 4.2 * nrows), squeeze=False)
    colours = plt.get_cmap("tab10")
    markers = "osD^v<>px*"
    for ax, cost in zip(axes.flat, costs):
        panel = [(di, d, cost_points(rows, cost, d)) for di, d in enumerate(groups)]
        placed = _LabelSpacer([xy for _, _, pts in panel for xy in pts])
        for di, d, pts in panel:
            for (x, y), labels in pts.items():
                ax.scatter(x, y, color=colours(di % 10), marker=markers[di % len(markers)],
                           s=46, label=d or "all questions")
                ax.annotate(" / ".join(labels), (x, y), textcoords="offset points",
                            xytext=(4, 4 + 10 * placed.crowd(x, y)), fontsize=8)
        ax.set_xlabel(PLOT_COSTS[cost])
        ax.set_ylabel("F1 (%)")
        ax.grid(alpha=0.3)
        ax.margins(0.15)
    for ax in list(axes.flat)[len(costs):]:
        ax.axis("off")
    if pooled:
        common = common_datasets(rows)
        fig.suptitle("F1 versus cost, one point per method, questions of "
                     + (", ".join(common) if common else "no dataset every run has")
                     + " pooled", y=0.98)
        fig.tight_layout(rect=(0, 0, 1, 0.94))
    else:
        handles, labels = axes.flat[0].get_legend_handles_labels()
        unique = dict(zip(labels, handles))
        fig.suptitle("F1 versus cost (one point per method and dataset)", y=0.99)
        fig.legend(unique.values(), unique.keys(), loc="upper center",
                   ncol=max(len(unique), 1), frameon=False, bbox_to_anchor=(0.5, 0.955),
                   title="dataset")
        fig.tight_layout(rect=(0, 0, 1, 0.88))
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _workflow_types(rows: list[Row]) -> list[str]:
    totals: dict[str, int] = {}
    for row in rows:
        for w, c in row.summary["workflows"].items():
            totals[w] = totals.get(w, 0) + c
    ranked = sorted(totals, key=lambda w: (-totals[w], w))
    return ranked[:MAX_WORKFLOW_TYPES]


def plot_workflows(rows: list[Row], path: Path) -> Path:
    plt = _pyplot()
    datasets = datasets_of(rows)
    kinds = _workflow_types(rows)
    has_other = any(w not in kinds for r in rows for w in r.summary["workflows"])
    labels = kinds + (["other"] if has_other else [])
    colours = plt.get_cmap("tab10")
    fig, axes = plt.subplots(1, len(datasets), figsize=(max(4.5, 0.9 * len(rows) + 2.5) * len(datasets), 5.0),
                             squeeze=False)
    for ax, d in zip(axes.flat, datasets):
        present = [r for r in rows if d in r.summary["datasets"]]
        bottoms = [0.0] * len(present)
        for ki, kind in enumerate(labels):
            shares = []
            for row in present:
                ds = row.summary["datasets"][d]
                wf = ds["workflows"]
                c = (sum(v for w, v in wf.items() if w not in kinds) if kind == "other"
                     else wf.get(kind, 0))
                shares.append(100.0 * c / max(ds["n"], 1))
            ax.bar(range(len(present)), shares, bottom=bottoms, color=colours(ki % 10),
                   label=kind, edgecolor="white", linewidth=0.5)
            bottoms = [b + s for b, s in zip(bottoms, shares)]
        ax.set_xticks(range(len(present)), [r.label for r in present], rotation=30, ha="right")
        ax.set_ylim(0, 100)
        ax.set_ylabel("share of questions (%)")
        ax.set_title(d)
    axes.flat[-1].legend(title="workflow", bbox_to_anchor=(1.02, 1), loc="upper left",
                         fontsize=8)
    fig.suptitle("Workflow types per method")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_role_validity(rows: list[Row], path: Path) -> Path:
    plt = _pyplot()
    roles = sorted({r for row in rows for r in row.summary["roles"] if r != RETRIEVAL_ROLE})
    colours = plt.get_cmap("tab10")
    width = 0.8 / max(len(rows), 1)
    fig, ax = plt.subplots(figsize=(min(14.0, max(6.0, 0.25 * len(roles) * len(rows) + 3)), 4.8))
    for i, row in enumerate(rows):
        rv = row.summary["roles"]
        xs = [j + (i - (len(rows) - 1) / 2) * width for j, r in enumerate(roles) if r in rv]
        ys = [100 * rv[r]["rate"] for r in roles if r in rv]
        ax.bar(xs, ys, width=width, color=colours(i % 10), label=row.label)
        for x, y in zip(xs, ys):
            if y == 0:  # a zero bar is invisible; say it was measured, not missing
                ax.text(x, 0.5, "0", ha="center", va="bottom", fontsize=7,
                        color=colours(i % 10))
    ax.set_xticks(range(len(roles)), roles, rotation=30, ha="right")
    ax.set_ylim(0, 105)
    ax.set_ylabel("format-valid steps (%)")
    ax.set_title("Format validity per role")
    ax.legend(bbox_to_anchor=(1.02, 1), loc="upper left", fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def write_plots(rows: list[Row], out_dir: Path) -> list[str]:
    """Write every plot into ``out_dir``; returns the file names written."""
    out_dir.mkdir(parents=True, exist_ok=True)
    written = [plot_f1_vs_cost(rows, out_dir / "f1_vs_cost.png")]
    if len(datasets_of(rows)) > 1:
        written.append(plot_f1_vs_cost(rows, out_dir / "f1_vs_cost_all.png", pooled=True))
    written.append(plot_workflows(rows, out_dir / "workflows.png"))
    if any(set(row.summary["roles"]) - {RETRIEVAL_ROLE} for row in rows):
        written.append(plot_role_validity(rows, out_dir / "role_validity.png"))
    return [p.name for p in written]
