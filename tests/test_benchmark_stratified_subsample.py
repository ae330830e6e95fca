"""benchmarks/stratified_subsample.py: a fold's sample keeps its mix of datasets and question
types (largest remainders), is a function of the seed and the ids only, and refuses records
that do not say their dataset."""

from __future__ import annotations

import json
from collections import Counter

from test_benchmark_make_crossfit_splits import SIZES, _records
from test_benchmark_plan_scripts import load


def _pool():
    return [r for name, n in SIZES.items() for r in _records(name, n)]


def _strata(sub, rows):
    return Counter(sub.stratum(r["dataset"], r) for r in rows)


def test_sample_is_proportional_to_the_strata_and_seeded():
    sub = load("stratified_subsample")
    pool = _pool()
    got = sub.subsample(pool, 87, seed=38)
    assert len(got) == 87 and len({r["id"] for r in got}) == 87
    whole, part = _strata(sub, pool), _strata(sub, got)
    for s, k in whole.items():  # largest remainders: within one of the exact share
        assert abs(part.get(s, 0) - 87 * k / len(pool)) < 1
    again = sub.subsample(list(reversed(pool)), 87, seed=38)
    assert [r["id"] for r in again] == [r["id"] for r in got]  # file order does not matter
    other = sub.subsample(pool, 87, seed=39)
    assert {r["id"] for r in other} != {r["id"] for r in got}


def test_cli_writes_records_and_ids_and_refuses_bad_input(tmp_path, capsys):
    sub = load("stratified_subsample")
    src = tmp_path / "fold.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in _pool()), encoding="utf-8")
    out = tmp_path / "s" / "fold-s40"
    assert sub.main([str(src), "-n", "40", "--out", str(out)]) == 0
    rows = [json.loads(x) for x in out.with_name("fold-s40.jsonl").read_text().splitlines()]
    assert [r["id"] for r in rows] == out.with_name("fold-s40.ids").read_text().split()
    assert "40 of 870 questions" in capsys.readouterr().out
    assert sub.main([str(src), "-n", "5000", "--out", str(out)]) == 2
    assert "cannot draw 5000" in capsys.readouterr().err
    src.write_text(json.dumps({"id": "q1", "question": "?"}) + "\n", encoding="utf-8")
    assert sub.main([str(src), "-n", "1", "--out", str(out)]) == 2
    assert "no 'dataset' field" in capsys.readouterr().err
