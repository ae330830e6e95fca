"""Comparison reports over run directories: a markdown table like the papers' and plots.

Public API: ``build_report(run_dirs, out_dir, plots=True) -> Report``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from marag.eval.load import load_run
from marag.metrics import Scorer
from marag.report.table import Row, comparison_table, group_rows, report_markdown

__all__ = ["Report", "Row", "build_report", "comparison_table", "group_rows"]


@dataclass
class Report:
    rows: list[Row]
    markdown: str
    out_dir: Path | None
    files: list[str]


def build_report(run_dirs: list[str | Path], out_dir: str | Path | None = None, *,
                 plots: bool = True, scorer: Scorer | None = None) -> Report:
    """Load the runs, tabulate them, and (with ``out_dir``) write report.md, summary.json, PNGs."""
    if not run_dirs:
        raise ValueError("no run directories given")
    rows = group_rows([load_run(p, scorer) for p in run_dirs], scorer)
    files: list[str] = []
    out = Path(out_dir) if out_dir is not None else None
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        if plots:
            from marag.report.plots import write_plots

            files += write_plots(rows, out)
    markdown = report_markdown(rows, files)
    if out is not None:
        (out / "report.md").write_text(markdown, encoding="utf-8")
        summary = {r.label: {"runs": [str(x.path) for x in r.runs], **r.summary} for r in rows}
        (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
        files = ["report.md", "summary.json", *files]
    return Report(rows, markdown, out, files)
