"""benchmarks/make_crossfit_splits.py: the representative splits of issue 38 -- stratified by
dataset and question type (development in proportion, the two folds level in every stratum),
disjoint, the old held-out questions kept apart as the confirmation set, and the draw a
function of the seed and the ids only. The committed ids are what a fresh draw gives."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from test_benchmark_plan_scripts import load

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "data"
COMMITTED = ROOT / "docs" / "results" / "qwen-runs" / "splits-cf"


def _records(name, n):
    """``n`` questions of dataset ``name`` with the kinds of types the real files have, file
    order sorted by type as theirs are."""
    rows = []
    for i in range(n):
        r = {"id": f"{name}-{i}", "question": f"q{i}?", "golden_answers": ["a"],
             "dataset": name}
        if name == "hotpotqa":
            r["type"] = "bridge" if i < n // 2 else "comparison"
            if r["type"] == "comparison" and i % 3 == 0:
                r["golden_answers"] = ["Yes"]
        elif name == "2wikimultihopqa":
            r["type"] = ("compositional", "comparison", "inference")[i * 3 // n]
            if r["type"] == "comparison" and i % 4 == 0:
                r["golden_answers"] = ["no"]
        elif name == "musique":
            hops = "2hop" if i < 0.7 * n else ("3hop1", "3hop2", "4hop1")[i % 3]
            r["id"] = f"{hops}__{i}_{i + 1}"
            r["type"] = hops
        rows.append(r)
    return rows


SIZES = {"nq_open": 300, "hotpotqa": 240, "2wikimultihopqa": 210, "musique": 120}


def _write(data, records):
    data.mkdir(parents=True, exist_ok=True)
    for name, rows in records.items():
        (data / f"{name}.questions.jsonl").write_text(
            "".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def _draw(tmp_path, name="out", records=None, *extra):
    cf = load("make_crossfit_splits")
    data = tmp_path / f"data-{name}"
    _write(data, records or {k: _records(k, n) for k, n in SIZES.items()})
    out = tmp_path / name
    assert cf.main(["--data", str(data), "--out", str(out), "--dev", "60", *extra]) == 0
    ids = {p.name.removesuffix(".ids"): p.read_text().split() for p in out.glob("*.ids")}
    return cf, out, ids, json.loads((out / "manifest.json").read_text())


def test_strata_are_types_yes_no_and_musique_hop_counts():
    cf = load("make_crossfit_splits")
    assert cf.stratum("nq_open", {"id": "x", "golden_answers": ["yes"]}) == "nq_open"
    assert cf.stratum("hotpotqa", {"id": "x", "type": "comparison",
                                   "golden_answers": [" No "]}) == "hotpotqa/comparison/yes-no"
    assert cf.stratum("hotpotqa", {"id": "x", "type": "bridge",
                                   "golden_answers": ["Nobody"]}) == "hotpotqa/bridge"
    assert cf.stratum("2wikimultihopqa", {"id": "x", "type": "inference",
                                          "golden_answers": ["a"]}) == "2wikimultihopqa/inference"
    for qid, want in (("2hop__1_2", "2hop"), ("3hop2__1_2_3", "3hop"), ("4hop3__1", "4hop")):
        assert cf.stratum("musique", {"id": qid, "type": "x"}) == f"musique/{want}"
    with pytest.raises(ValueError, match="hop"):
        cf.stratum("musique", {"id": "abc"})


def test_largest_remainder_allotment():
    cf = load("make_crossfit_splits")
    assert cf.allot({"a": 10, "b": 10, "c": 10}, 10) == {"a": 4, "b": 3, "c": 3}  # ties by name
    assert cf.allot({"a": 1, "b": 99}, 10) == {"a": 0, "b": 10}
    assert sum(cf.allot({"a": 7, "b": 13, "c": 29}, 17).values()) == 17


def test_splits_are_disjoint_cover_everything_and_keep_the_old_held_out_apart(tmp_path):
    _, out, ids, man = _draw(tmp_path)
    every = {r["id"] for k, n in SIZES.items() for r in _records(k, n)}
    parts = [set(ids[k]) for k in ("confirm", "dev", "fold-a", "fold-b")]
    assert sum(len(p) for p in parts) == len(every) and set().union(*parts) == every
    # confirmation = positions [0, 50) of each file: the old held-out questions
    old = {r["id"] for k, n in SIZES.items() for r in _records(k, n)[:50]}
    assert set(ids["confirm"]) == old
    assert ids["heldout"] == ids["fold-a"] + ids["fold-b"]
    base = set(ids["dev"]) | old
    assert set(ids["train-a.exclude"]) == base | set(ids["fold-b"])  # trains on fold A only
    assert set(ids["train-b.exclude"]) == base | set(ids["fold-a"])
    assert len(ids["dev"]) == 60
    held = [json.loads(ln)["id"] for ln in (out / "heldout.jsonl").read_text().splitlines()]
    assert held == ids["heldout"]  # the shared lines, in the ids' order
    assert man["splits"]["heldout"]["n"] == len(ids["heldout"])
    # the old development range [100, 150) is not set aside: all of it is in the new splits
    assert sum(man["old_dev_range"].values()) == sum(min(n, 150) - 100 for n in SIZES.values())


def test_every_split_keeps_each_strata_share(tmp_path):
    _, _, _, man = _draw(tmp_path)
    s = man["splits"]
    pool = s["pool"]["by_stratum"]
    n = s["pool"]["n"]
    assert len(pool) >= 9  # types, yes/no and hop counts are separate strata
    for stratum, k in pool.items():
        a = s["fold-a"]["by_stratum"].get(stratum, 0)
        b = s["fold-b"]["by_stratum"].get(stratum, 0)
        d = s["dev"]["by_stratum"].get(stratum, 0)
        assert a + b + d == k
        assert abs(a - b) <= 1  # the folds are level in every stratum
        assert abs(d - 60 * k / n) < 1  # development in proportion (largest remainders)
    assert abs(s["fold-a"]["n"] - s["fold-b"]["n"]) <= 1
    # musique's 2-hop questions come first in its file; every split still has 3- and 4-hop
    for split in ("fold-a", "fold-b"):
        assert {"musique/3hop", "musique/4hop", "hotpotqa/comparison/yes-no"} <= set(
            s[split]["by_stratum"])


def test_the_draw_depends_on_the_seed_and_the_ids_only(tmp_path):
    _, _, first, man = _draw(tmp_path, "a")
    _, _, again, man2 = _draw(tmp_path, "b")
    assert first == again and man == man2
    # lines past the confirmation positions reordered: the same membership
    records = {k: _records(k, n) for k, n in SIZES.items()}
    for rows in records.values():
        tail = rows[50:]
        random.Random(1).shuffle(tail)
        rows[50:] = tail
    _, _, moved, _ = _draw(tmp_path, "c", records)
    for k in ("dev", "fold-a", "fold-b", "confirm"):
        assert set(moved[k]) == set(first[k])
    _, _, other, _ = _draw(tmp_path, "d", None, "--seed", "7")
    assert set(other["fold-a"]) != set(first["fold-a"])
    assert set(other["confirm"]) == set(first["confirm"])


def test_check_reports_a_changed_folder(tmp_path, capsys):
    cf, out, ids, _ = _draw(tmp_path)
    data = tmp_path / "data-out"
    assert cf.main(["--data", str(data), "--dev", "60", "--check", str(out)]) == 0
    (out / "dev.ids").write_text("\n".join(ids["dev"][1:]) + "\n")
    assert cf.main(["--data", str(data), "--dev", "60", "--check", str(out)]) == 1
    assert "dev.ids" in capsys.readouterr().err


@pytest.mark.skipif(not (SHARED / "musique.questions.jsonl").is_file(),
                    reason="needs ../shared/data")
def test_the_committed_splits_are_a_fresh_draw_of_the_shared_data():
    cf = load("make_crossfit_splits")
    assert cf.main(["--data", str(SHARED), "--check", str(COMMITTED)]) == 0
    man = json.loads((COMMITTED / "manifest.json").read_text())
    assert man["splits"]["heldout"]["n"] >= 1000 and 100 <= man["splits"]["dev"]["n"] <= 150
    old = (ROOT / "docs" / "results" / "qwen-runs" / "splits" / "heldout.ids").read_text().split()
    assert (COMMITTED / "confirm.ids").read_text().split() == old
