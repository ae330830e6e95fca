"""``marag report-train``'s curves, on run 2c's committed metrics (Qwen2.5-Coder-0.5B)."""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import pytest

from marag.report.training import evaluation_points, kl_series, plot_training, read_metrics

RUN = Path(__file__).resolve().parents[2] / "docs" / "results" / "qwen-runs" / "jade-2c"


def test_the_runs_own_evaluations_are_its_development_points():
    rows = read_metrics(RUN)
    assert evaluation_points(rows) == [(3, pytest.approx(0.2507, abs=1e-4)),
                                       (6, pytest.approx(0.2441, abs=1e-4))]


def test_kl_curves_are_the_ones_the_run_logged():
    """Run 2c used no reference (kl_coef 0), so there is no KL-to-reference curve to draw as
    zeros; the update's KL and the entropy are there, one value per iteration."""
    series = kl_series(read_metrics(RUN))
    assert set(series) == {"KL of each update (old to new policy)", "entropy (per token)"}
    assert all(len(v) == 6 and not any(math.isnan(x) for x in v) for v in series.values())
    with_kl = kl_series([{"iteration": 1, "kl": 0.1}, {"iteration": 2}])
    assert with_kl["KL to reference (k1, per token)"][0] == 0.1
    assert math.isnan(with_kl["KL to reference (k1, per token)"][1])


def test_plots_are_written_for_a_real_run(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    shutil.copy(RUN / "metrics.jsonl", run / "metrics.jsonl")
    files = plot_training(run, tmp_path / "plots", heldout=[(0, 0.24), (3, 0.25)])
    assert [f.name for f in files] == ["train_reward_f1.png", "train_validity.png",
                                       "train_kl.png", "train_workflows.png", "heldout_f1.png"]
    assert all(f.stat().st_size > 1000 for f in files)


def test_an_empty_run_is_a_clear_error(tmp_path):
    (tmp_path / "metrics.jsonl").write_text("")
    with pytest.raises(ValueError, match="no rows yet"):
        plot_training(tmp_path, tmp_path / "plots")
