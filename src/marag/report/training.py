"""Plots of a training run from its ``metrics.jsonl`` (written by ``marag train``): reward and
F1, format-valid rate per role, KL, workflow mix against iteration, and held-out F1 per
checkpoint when evaluation runs of checkpoints are given."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from marag.report.plots import _pyplot


def metrics_rows(path: Path) -> list[dict[str, Any]]:
    """The rows of a ``metrics.jsonl``; a torn last line (a run killed mid-write, or still
    being written) ends the list, and a line that is not an object with an integer
    ``iteration`` is skipped."""
    rows = []
    for line in path.read_bytes().decode("utf-8", errors="replace").splitlines():
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            break
        if isinstance(row, dict) and isinstance(row.get("iteration"), int) \
                and not isinstance(row["iteration"], bool):
            rows.append(row)
    return rows


def read_metrics(run: str | Path) -> list[dict[str, Any]]:
    path = Path(run) / "metrics.jsonl"
    if not path.is_file():
        raise ValueError(f"{run}: no metrics.jsonl (not a marag train run)")
    return metrics_rows(path)


def _series(rows: list[dict[str, Any]], prefix: str, missing: float = float("nan")
            ) -> dict[str, list[float]]:
    """Per key under ``prefix``, its value in every row; ``missing`` where a row lacks it (a
    role that did not run that iteration is a gap in a line, not 0% valid)."""
    keys = sorted({k for r in rows for k in r if k.startswith(prefix)})
    return {k[len(prefix):]: [float(r.get(k, missing)) for r in rows] for k in keys}


def evaluation_points(rows: list[dict[str, Any]]) -> list[tuple[int, float]]:
    """(iteration, F1) of the run's own evaluations of its checkpoints (``train.eval_every``
    on ``train.eval_dataset``, greedy)."""
    return [(int(r["iteration"]), float(r["eval.f1"])) for r in rows if "eval.f1" in r]


def kl_series(rows: list[dict[str, Any]]) -> dict[str, list[float]]:
    """The KL and entropy curves the run logged, by label: the KL to the reference exists only
    when something used the reference (KL in the reward or loss)."""
    labels = {"kl": "KL to reference (k1, per token)",
              "approx_kl": "KL of each update (old to new policy)",
              "entropy": "entropy (per token)"}
    return {label: [float(r.get(key, float("nan"))) for r in rows]
            for key, label in labels.items() if any(key in r for r in rows)}


def plot_training(run: str | Path, out: str | Path,
                  heldout: Sequence[tuple[int, float]] = ()) -> list[Path]:
    """Write the PNGs into ``out``; ``heldout`` is (iteration, F1) pairs, 0 = untrained."""
    rows = read_metrics(run)
    if not rows:
        raise ValueError(f"{run}: metrics.jsonl has no rows yet")
    plt = _pyplot()
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    it = [r["iteration"] for r in rows]
    files = []

    def save(fig: Any, name: str) -> None:
        fig.tight_layout()
        fig.savefig(out / name, dpi=110)
        plt.close(fig)
        files.append(out / name)

    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.plot(it, [r["reward"] for r in rows], label="mean trace reward")
    ax.plot(it, [r["f1"] for r in rows], label="rollout F1")
    dev = evaluation_points(rows)
    if dev:
        ax.plot([d[0] for d in dev], [d[1] for d in dev], marker="o",
                label="evaluation F1 (train.eval_dataset)")
    ax.set_xlabel("iteration")
    ax.legend()
    ax.set_title("training reward and F1")
    save(fig, "train_reward_f1.png")

    fig, ax = plt.subplots(figsize=(6, 3.5))
    for role, ys in _series(rows, "valid.").items():
        ax.plot(it, ys, label=role)
    ax.set_ylim(-0.05, 1.05)
    ax.set_xlabel("iteration")
    ax.set_ylabel("format-valid rate")
    ax.legend(fontsize=8)
    ax.set_title("format-valid rate per role (rollouts)")
    save(fig, "train_validity.png")

    fig, ax = plt.subplots(figsize=(6, 3.5))
    for label, ys in kl_series(rows).items():
        ax.plot(it, ys, label=label)
    ax.set_xlabel("iteration")
    ax.legend()
    ax.set_title("KL and entropy")
    save(fig, "train_kl.png")

    fig, ax = plt.subplots(figsize=(6, 3.5))
    mix = _series(rows, "workflow.", missing=0.0)
    bottom = [0.0] * len(it)
    for wf, ys in mix.items():
        ax.bar(it, ys, bottom=bottom, label=wf)
        bottom = [b + y for b, y in zip(bottom, ys)]
    ax.set_xlabel("iteration")
    ax.set_ylabel("share of rollouts")
    ax.legend(fontsize=7)
    ax.set_title("workflow mix")
    save(fig, "train_workflows.png")

    if heldout:
        pts = sorted(heldout)
        fig, ax = plt.subplots(figsize=(6, 3.5))
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o")
        ax.set_xlabel("checkpoint (iteration; 0 = untrained)")
        ax.set_ylabel("held-out F1")
        ax.set_title("held-out F1 per checkpoint")
        save(fig, "heldout_f1.png")
    return files
