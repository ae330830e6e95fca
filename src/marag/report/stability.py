"""Training stability across seeds, as M-ASK measures it (S4.3, Table 2, Figure 3).

M-ASK counts a run as collapsed when its score drops to about zero and does not recover. The
rule here makes that exact: a run **collapses at iteration t** when the mean training F1 over
the ``window`` iterations ending at t is below ``near_zero`` and stays below it at every later
iteration, and the run had been above it before (a run that never left zero did not
collapse: it never learnt). The format-validity rate is reported beside it, since a run
whose F1 dies with its formats (every step invalid) is the usual shape of a GRPO collapse.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

NEAR_ZERO = 0.05
WINDOW = 3


def smoothed(values: Sequence[float], window: int = WINDOW) -> list[float]:
    """The trailing mean over up to ``window`` values (NaN entries skipped)."""
    out = []
    for i in range(len(values)):
        part = [v for v in values[max(0, i - window + 1):i + 1] if not math.isnan(v)]
        out.append(sum(part) / len(part) if part else math.nan)
    return out


def collapse_point(f1: Sequence[float], near_zero: float = NEAR_ZERO,
                   window: int = WINDOW) -> int | None:
    """The 0-based index of the iteration where the run collapsed, or None (the rule in the
    module docstring)."""
    s = smoothed(f1, window)
    if not any(v >= near_zero for v in s if not math.isnan(v)):
        return None
    start = None
    for i, v in enumerate(s):
        if not math.isnan(v) and v < near_zero:
            if start is None:
                start = i
        else:
            start = None
    if start is None or start == 0 or len(s) - start < window:
        return None  # never fell, or fell at the start, or not long enough to call it
    return start


@dataclass(frozen=True)
class SeedRun:
    name: str
    f1: list[float]
    reward: list[float]
    validity: list[float]  # share of valid LLM steps per iteration
    response_tokens: list[float]  # completion tokens per trace

    @property
    def collapsed_at(self) -> int | None:
        return collapse_point(self.f1)


def _validity(row: dict[str, Any]) -> float:
    vals = [v for k, v in row.items() if k.startswith("valid.") and isinstance(v, int | float)]
    return sum(vals) / len(vals) if vals else math.nan


def load_seed_run(run: str | Path) -> SeedRun:
    from marag.report.training import read_metrics

    rows = read_metrics(run)
    if not rows:
        raise ValueError(f"{run}: no metrics rows")

    def col(key: str) -> list[float]:
        return [float(r.get(key, math.nan)) for r in rows]

    return SeedRun(Path(run).name, col("f1"), col("reward"), [_validity(r) for r in rows],
                   col("completion_tokens"))


def stability_table(groups: dict[str, list[SeedRun]]) -> str:
    """Markdown: per method, the seeds, iterations, collapses (at which iteration), final
    smoothed F1 per seed, and the rule."""
    lines = ["| method | seeds | iterations | collapsed | final F1 (mean of last 3) per seed |",
             "|---|---:|---:|---|---|"]
    for label, runs in groups.items():
        its = max(len(r.f1) for r in runs)
        falls = [f"{r.name}@{r.collapsed_at + 1}" for r in runs if r.collapsed_at is not None]
        finals = ", ".join(f"{smoothed(r.f1)[-1]:.3f}" for r in runs)
        lines.append(f"| {label} | {len(runs)} | {its} | {len(falls)} of {len(runs)}"
                     f"{' (' + ', '.join(falls) + ')' if falls else ''} | {finals} |")
    lines.append("")
    lines.append(f"Collapse: the trailing mean of {WINDOW} iterations' training F1 falls below "
                 f"{NEAR_ZERO} after having been above it, and stays below to the end "
                 "(M-ASK S4.3: the score drops to about zero and does not recover).")
    return "\n".join(lines)


def plot_stability(groups: dict[str, list[SeedRun]], out: str | Path) -> list[Path]:
    """One figure: smoothed training F1 per seed (one panel per method) and format validity;
    collapses marked. Returns the files written."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    fig, axes = plt.subplots(2, len(groups), figsize=(5 * len(groups), 6), squeeze=False)
    for j, (label, runs) in enumerate(groups.items()):
        top, bottom = axes[0][j], axes[1][j]
        for r in runs:
            xs = list(range(1, len(r.f1) + 1))
            (line,) = top.plot(xs, smoothed(r.f1), label=r.name)
            bottom.plot(xs, r.validity, color=line.get_color())
            if r.collapsed_at is not None:
                top.axvline(r.collapsed_at + 1, color=line.get_color(), linestyle=":")
        top.axhline(NEAR_ZERO, color="grey", linewidth=0.5)
        top.set_title(f"{label}: training F1 (mean of {WINDOW})")
        bottom.set_title("valid LLM steps")
        bottom.set_xlabel("iteration")
        top.legend(fontsize="small")
    fig.tight_layout()
    path = out / "stability.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    table = out / "stability.md"
    table.write_text(stability_table(groups) + "\n")
    return [path, table]
