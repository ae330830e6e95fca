"""Collapse across seeds, M-ASK's way: the rule, the table, the figure, and --seeds."""

from __future__ import annotations

import json
import math

from marag.cli import build_parser, main
from marag.commands.train import seed_runs
from marag.report.stability import collapse_point, smoothed


def test_a_run_that_falls_to_zero_and_stays_there_collapsed():
    f1 = [0.2, 0.3, 0.35, 0.3, 0.1, 0.0, 0.0, 0.0, 0.0, 0.0]
    at = collapse_point(f1)
    assert at is not None and smoothed(f1)[at] < 0.05 <= smoothed(f1)[at - 1]


def test_recovery_a_short_dip_or_never_learning_is_no_collapse():
    assert collapse_point([0.3, 0.0, 0.0, 0.0, 0.0, 0.3, 0.4, 0.4, 0.4]) is None  # recovered
    assert collapse_point([0.3, 0.3, 0.3, 0.3, 0.0, 0.0]) is None  # < window iterations low
    assert collapse_point([0.0, 0.01, 0.0, 0.0, 0.0]) is None  # never above zero
    assert math.isnan(smoothed([math.nan])[0])


def _run(path, f1s):
    path.mkdir(parents=True)
    rows = [{"iteration": i + 1, "f1": f, "reward": f, "valid.search-r1": 1.0 if f else 0.2,
             "completion_tokens": 100.0} for i, f in enumerate(f1s)]
    (path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_report_stability_counts_collapses_and_draws_them(tmp_path, capsys):
    _run(tmp_path / "a0", [0.2, 0.3, 0.3, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0])
    _run(tmp_path / "a1", [0.2, 0.3, 0.3, 0.3, 0.3, 0.3, 0.3, 0.3, 0.3])
    _run(tmp_path / "b0", [0.1, 0.2, 0.2, 0.3, 0.3, 0.3, 0.3, 0.3, 0.3])
    out = tmp_path / "rep"
    code = main(["report-stability", f"search-r1={tmp_path / 'a0'}",
                 f"search-r1={tmp_path / 'a1'}", f"m-ask={tmp_path / 'b0'}", "--out", str(out)])
    assert code == 0
    text = (out / "stability.md").read_text()
    assert "| search-r1 | 2 | 9 | 1 of 2 (a0@6) |" in text
    assert "| m-ask | 1 | 9 | 0 of 1 |" in text
    assert (out / "stability.png").stat().st_size > 1000
    assert main(["report-stability", "no-label-here"]) == 2
    assert "METHOD=TRAIN_DIR" in capsys.readouterr().err


def test_seeds_become_one_run_per_seed_folder():
    args = build_parser().parse_args(["train", "--out", "runs/x", "--seeds", "3",
                                      "--set", "train.iterations=2"])
    runs = seed_runs(args)
    assert [r.out for r in runs] == ["runs/x/seed-0", "runs/x/seed-1", "runs/x/seed-2"]
    assert all(r.seeds is None for r in runs)
    assert runs[2].overrides[-1] == "train.seed=2"
