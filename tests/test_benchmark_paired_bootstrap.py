"""benchmarks/paired_bootstrap.py: the paired statistics SPLITS.md states (bootstrap interval,
paired t with its normal p-value, Holm's adjustment) on known values, and the command on
real trace files: pooled folds, per-dataset rows, gzipped traces, mismatched runs refused."""

from __future__ import annotations

import gzip
import math
import shutil

import pytest

from marag.types import Trace, write_jsonl
from test_benchmark_plan_scripts import load


def _run(tmp_path, name, f1_by_id, gz=False):
    d = tmp_path / name
    d.mkdir()
    traces = [Trace(id=i, question=f"q {i}", method="vanilla", dataset=ds, metrics={"f1": f})
              for i, (f, ds) in f1_by_id.items()]
    write_jsonl(d / "traces.jsonl", traces)
    if gz:
        with open(d / "traces.jsonl", "rb") as src, gzip.open(d / "traces.jsonl.gz", "wb") as dst:
            shutil.copyfileobj(src, dst)
        (d / "traces.jsonl").unlink()
    return d


def test_paired_t_matches_the_formula_and_handles_constant_differences():
    pb = load("paired_bootstrap")
    diffs = [1.0, 0.0, 2.0, 1.0, 1.0]
    t, p = pb.paired_t(diffs)
    sd = math.sqrt(sum((d - 1.0) ** 2 for d in diffs) / 4)
    assert t == pytest.approx(1.0 / (sd / math.sqrt(5)))
    assert p == pytest.approx(2 * (1 - 0.5 * (1 + math.erf(t / math.sqrt(2)))))
    assert pb.paired_t([0.0, 0.0]) == (0.0, 1.0)
    assert pb.paired_t([0.5, 0.5]) == (math.inf, 0.0)
    assert pb.paired_t([-0.5, -0.5]) == (-math.inf, 0.0)
    with pytest.raises(ValueError):
        pb.paired_t([1.0])


def test_holm_is_step_down_and_monotone_in_the_given_order():
    pb = load("paired_bootstrap")
    # sorted 0.01, 0.02, 0.04: 3 x 0.01, 2 x 0.02, 1 x 0.04, each at least the one before
    assert pb.holm([0.04, 0.01, 0.02]) == pytest.approx([0.04, 0.03, 0.04])
    assert pb.holm([0.6, 0.7]) == pytest.approx([1.0, 1.0])  # capped at 1, not 1.2
    assert pb.holm([]) == []


def test_interval_brackets_the_mean_and_is_seeded():
    pb = load("paired_bootstrap")
    diffs = [0.0] * 50 + [1.0] * 30 + [-1.0] * 20
    mean, lo, hi = pb.paired_interval(diffs, samples=2000)
    assert mean == pytest.approx(0.1) and lo < mean < hi
    assert pb.paired_interval(diffs, samples=2000) == (mean, lo, hi)
    _, lo99, hi99 = pb.paired_interval(diffs, samples=2000, level=0.99)
    assert lo99 <= lo and hi <= hi99 and (lo99, hi99) != (lo, hi)
    with pytest.raises(ValueError):
        pb.paired_interval(diffs, level=1.0)


def test_command_pools_folds_reports_datasets_and_refuses_mismatches(tmp_path, capsys,
                                                                     monkeypatch):
    pb = load("paired_bootstrap")
    a1 = _run(tmp_path, "a-on-b", {"1": (1.0, "nq"), "2": (0.5, "nq")})
    a2 = _run(tmp_path, "a-on-a", {"3": (1.0, "hotpotqa"), "4": (0.0, "hotpotqa")}, gz=True)
    b = _run(tmp_path, "b", {"1": (0.0, "nq"), "2": (0.5, "nq"), "3": (0.0, "hotpotqa"),
                             "4": (0.0, "hotpotqa")})
    monkeypatch.setattr("sys.argv", ["pb", f"{a1},{a2}", str(b), "--by-dataset",
                                     "--samples", "200"])
    pb.main()
    out = capsys.readouterr().out
    assert "a-on-b+a-on-a: F1 0.6250   b: F1 0.1250   n=4" in out  # a pooled row names each
    assert "difference +0.5000" in out and "higher on 2, lower on 0, tied on 2" in out
    assert "hotpotqa (n=2, 0.5000 vs 0.0000)" in out and "nq (n=2, 0.7500 vs 0.2500)" in out
    # pooled diffs 1, 0, 1, 0: mean 0.5, sd 0.577, t = 0.5 / (0.577 / 2) = 1.73
    assert "paired t 1.73, p 0.083" in out
    assert out.count("paired t") == 1  # the per-dataset rows are descriptive: no test
    short = _run(tmp_path, "short", {"1": (0.0, "nq")})
    monkeypatch.setattr("sys.argv", ["pb", str(short), str(b)])
    with pytest.raises(SystemExit, match="share 1 questions of 1 and 4"):
        pb.main()
    monkeypatch.setattr("sys.argv", ["pb", f"{a1},{a1}", str(b)])
    with pytest.raises(SystemExit, match="in two of the pooled runs"):
        pb.main()
    drop = tmp_path / "drop.ids"
    drop.write_text("3\n\n", encoding="utf-8")
    monkeypatch.setattr("sys.argv", ["pb", f"{a1},{a2}", str(b), "--exclude-ids", str(drop),
                                     "--samples", "200"])
    pb.main()
    out = capsys.readouterr().out
    assert "1 of the 4 questions left out" in out and "higher on 1, lower on 0, tied on 2" in out
    monkeypatch.setattr("sys.argv", ["pb", f"{a1},{a2}", str(b), "--exclude-ids",
                                     str(tmp_path / "none.ids")])
    with pytest.raises(SystemExit, match="is not a file"):
        pb.main()


def test_holm_option_prints_adjusted_values_and_refuses_non_probabilities(capsys, monkeypatch):
    pb = load("paired_bootstrap")
    monkeypatch.setattr("sys.argv", ["pb", "--holm", "0.01", "0.04"])
    pb.main()
    assert capsys.readouterr().out.splitlines() == ["p 0.01 -> Holm 0.02", "p 0.04 -> Holm 0.04"]
    monkeypatch.setattr("sys.argv", ["pb", "--holm", "1.5"])
    with pytest.raises(SystemExit, match="between 0 and 1"):
        pb.main()
    monkeypatch.setattr("sys.argv", ["pb", "runs/x", "--holm", "0.1"])
    with pytest.raises(SystemExit):
        pb.main()
