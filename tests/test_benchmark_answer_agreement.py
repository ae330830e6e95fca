"""benchmarks/answer_agreement.py: answer agreement of a re-run with a committed row, on real
trace files (plain and gzipped), and a re-run on other questions refused."""

from __future__ import annotations

import gzip
import shutil

import pytest

from marag.types import Trace, write_jsonl
from test_benchmark_plan_scripts import load


def _run(tmp_path, name, rows, gz=False):
    d = tmp_path / name
    d.mkdir()
    write_jsonl(d / "traces.jsonl", [
        Trace(id=i, question=f"q {i}", method="jade", dataset="nq", answer=a, metrics={"f1": f},
              status="failed" if a is None else "ok")
        for i, (a, f) in rows.items()])
    if gz:
        with open(d / "traces.jsonl", "rb") as src, gzip.open(d / "traces.jsonl.gz", "wb") as dst:
            shutil.copyfileobj(src, dst)
        (d / "traces.jsonl").unlink()
    return d


def test_counts_the_same_answers_over_the_first_runs_questions(tmp_path, capsys):
    aa = load("answer_agreement")
    new = _run(tmp_path, "new", {"a": ("Paris", 1.0), "b": ("1999", 0.0)})
    ref = _run(tmp_path, "ref", {"a": ("Paris", 1.0), "b": ("2001", 1.0), "c": ("x", 0.5)},
               gz=True)
    a = aa.agreement(aa.load(new), aa.load(ref))
    assert (a.same, a.n, a.failed) == (1, 2, 0)
    assert a.f1_first == pytest.approx(50.0) and a.f1_second == pytest.approx(100.0)
    aa.main([str(new), str(ref), "--label", "team"])
    assert capsys.readouterr().out.startswith("team: 1 of 2 answers the same as ")


def test_a_question_missing_from_the_second_run_is_an_error(tmp_path):
    aa = load("answer_agreement")
    new = _run(tmp_path, "new", {"a": ("Paris", 1.0), "z": ("?", 0.0)})
    ref = _run(tmp_path, "ref", {"a": ("Paris", 1.0)})
    with pytest.raises(SystemExit, match="1 question.*not in the second.*'z'"):
        aa.main([str(new), str(ref)])
    with pytest.raises(ValueError, match="no questions"):
        aa.agreement({}, aa.load(ref))


def test_two_failed_traces_do_not_agree(tmp_path, capsys):
    aa = load("answer_agreement")
    new = _run(tmp_path, "new", {"a": (None, 0.0), "b": ("1999", 0.0)})
    ref = _run(tmp_path, "ref", {"a": (None, 0.0), "b": ("1999", 0.0)})
    a = aa.agreement(aa.load(new), aa.load(ref))
    assert (a.same, a.n, a.failed) == (1, 2, 1)
    aa.main([str(new), str(ref)])
    assert "1 of 2 answers the same" in capsys.readouterr().out
