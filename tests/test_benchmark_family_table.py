"""benchmarks/family_table.py: the rows table and the Holm-adjusted comparisons of one family,
on real trace files (pooled folds, a row still running, mismatched rows refused)."""

from __future__ import annotations

import json

import pytest

from marag.types import Node, Trace, write_jsonl
from test_benchmark_plan_scripts import load


def _run(tmp_path, name, answers, finished=True):
    """A run directory whose traces answer question ``id`` with ``answers[id]`` (the golden
    answer of every question is "paris"), on the dataset ``answers[id][1]``."""
    d = tmp_path / name
    d.mkdir()
    traces = [Trace(id=i, question=f"q {i}", method="jade", dataset=ds, answer=a,
                    golden_answers=["paris"], metrics={"f1": float(a == "paris")},
                    nodes=[Node(id=0, question=f"q {i}", workflow=["R", "AG"])])
              for i, (a, ds) in answers.items()]
    write_jsonl(d / "traces.jsonl", traces)
    if finished:
        (d / "metrics.json").write_text(json.dumps({"n": len(traces)}), encoding="utf-8")
    return d


def test_rows_and_comparisons_pool_folds_and_adjust_over_the_family(tmp_path, capsys):
    ft = load("family_table")
    team_a = _run(tmp_path, "team-a", {"1": ("paris", "nq_open"), "2": ("paris", "nq_open")})
    team_b = _run(tmp_path, "team-b", {"3": ("paris", "hotpotqa"), "4": ("rome", "hotpotqa")})
    van = _run(tmp_path, "van", {"1": ("rome", "nq_open"), "2": ("paris", "nq_open"),
                                 "3": ("rome", "hotpotqa"), "4": ("rome", "hotpotqa")})
    running = _run(tmp_path, "warm", {"1": ("paris", "nq_open")}, finished=False)
    ft.main(["--row", "team", "trained team", f"{team_a},{team_b}",
             "--row", "vanilla", "vanilla", str(van), "--row", "warm", "warm", str(running),
             "--compare", "team", "vanilla", "team - vanilla",
             "--compare", "team", "warm", "team - warm", "--samples", "300"])
    captured = capsys.readouterr()
    lines = captured.out.splitlines()
    assert lines[0].startswith("| row | n | F1 | EM | acc | nq_open F1 (n 2) | hotpotqa F1 (n 2)")
    assert lines[1] == "|---|---:|---:|---:|---:|---:|---:|---:|---|"  # 9 columns
    assert all(line.count("|") == 10 for line in lines[:5])
    assert lines[2] == "| trained team | 4 | 75.0 | 75.0 | 75.0 | 100.0 | 50.0 | 0 | `R,AG` 4 |"
    assert lines[3].startswith("| vanilla | 4 | 25.0 | 25.0 | 25.0 | 50.0 | 0.0 |")
    assert lines[4].startswith("| warm | missing:")
    assert "has not finished" in captured.err
    # team - vanilla: differences 1, 0, 1, 0 -> +50 points, t 1.73, p 0.083; the missing
    # comparison counts with p = 1, so Holm gives 2 x 0.083 = 0.17 to the first
    first, second = lines[-2], lines[-1]
    assert first.startswith("| 1: team - vanilla | 4 | +50.0 | [")
    assert first.endswith("| 2 / 0 / 2 | 0.083 | 0.17 |")
    assert second == "| 2: team - warm | | missing (counted with p = 1) | | | | 1 | 1 |"


def test_intervals_come_from_one_seeded_resampling_as_paired_bootstrap_gives_them(tmp_path):
    ft, pb = load("family_table"), load("paired_bootstrap")
    answers = {str(i): ("paris" if i % 3 else "rome", "nq_open") for i in range(30)}
    other = {str(i): ("paris" if i % 2 else "rome", "nq_open") for i in range(30)}
    a, b = ft.load_row(str(_run(tmp_path, "a", answers))), ft.load_row(str(_run(tmp_path, "b", other)))
    s = ft.comparison(a, b, samples=500)
    diffs = [float(answers[str(i)][0] == "paris") - float(other[str(i)][0] == "paris")
             for i in sorted(str(i) for i in range(30))]
    for level, lo, hi in ((0.95, "lo95", "hi95"), (0.99, "lo99", "hi99")):
        mean, want_lo, want_hi = pb.paired_interval(diffs, 500, level=level)
        assert (s[lo], s[hi]) == pytest.approx((100 * want_lo, 100 * want_hi))
    assert s["diff"] == pytest.approx(100 * mean)
    assert s["higher"] + s["lower"] + s["tied"] == 30


def test_mismatched_rows_and_unknown_keys_are_refused(tmp_path, capsys):
    ft = load("family_table")
    a = _run(tmp_path, "a", {"1": ("paris", "nq_open"), "2": ("rome", "nq_open")})
    b = _run(tmp_path, "b", {"1": ("paris", "nq_open")})
    with pytest.raises(SystemExit, match="hold different questions"):
        ft.main(["--row", "a", "A", str(a), "--row", "b", "B", str(b),
                 "--compare", "a", "b", "a - b", "--samples", "50"])
    with pytest.raises(SystemExit, match="in two of the pooled runs"):
        ft.main(["--row", "a", "A", f"{a},{a}"])
    one = _run(tmp_path, "one", {"1": ("paris", "nq_open")})
    with pytest.raises(SystemExit, match="at least two questions"):
        ft.main(["--row", "x", "X", str(one), "--row", "y", "Y", str(one),
                 "--compare", "x", "y", "x - y"])
    stale = _run(tmp_path, "stale", {"1": ("paris", "nq_open"), "2": ("rome", "nq_open")})
    lines = (stale / "traces.jsonl").read_text(encoding="utf-8").splitlines()
    lines[1] = lines[1].replace('"f1": 0.0', '"f1": 1.0')  # scored by an older metric
    (stale / "traces.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(SystemExit, match="stored F1 of 1 traces differs"):
        ft.main(["--row", "s", "S", str(stale)])
    with pytest.raises(SystemExit):
        ft.main(["--row", "a", "A", str(a), "--compare", "a", "c", "a - c"])
    assert "which no --row defines" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        ft.main(["--row", "a", "A", str(a), "--row", "a", "again", str(b)])
    out = tmp_path / "table.md"
    ft.main(["--row", "a", "A | B", str(a), "--out", str(out)])
    text = out.read_text(encoding="utf-8")
    assert text.startswith("| row | n | F1 |") and "| A \\| B | 2 |" in text
