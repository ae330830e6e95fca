"""benchmarks/make_splits.py: the learning runs' fixed splits never overlap, the training
exclusion covers held-out and both development halves, and the second development half
(``devb``) is the part of the development range training's checkpoint evaluation never sees."""

from __future__ import annotations

import json
import sys

from test_benchmark_plan_scripts import load


def _write(data, name, n):
    lines = [json.dumps({"id": f"{name}-{i}", "question": f"q{i}?", "golden_answers": ["a"]})
             for i in range(n)]
    (data / f"{name}.questions.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")


def test_splits_are_disjoint_and_devb_is_the_rest_of_the_development_range(tmp_path,
                                                                           monkeypatch):
    splits = load("make_splits")
    data = tmp_path / "data"
    data.mkdir()
    for name in splits.DATASETS:
        _write(data, name, 160)
    out = tmp_path / "splits"
    monkeypatch.setattr(sys, "argv", ["make_splits", "--data", str(data), "--out", str(out),
                                      "--dev-per-dataset", "10"])
    splits.main()
    ids = {k: (out / f"{k}.ids").read_text().split() for k in
           ("heldout", "dev", "devb", "exclude")}
    assert len(ids["heldout"]) == 4 * 50
    assert len(ids["dev"]) == 4 * 10 and len(ids["devb"]) == 4 * 40
    assert ids["dev"][:2] == ["nq_open-100", "nq_open-101"]
    assert ids["devb"][0] == "nq_open-110" and ids["devb"][39] == "nq_open-149"
    assert not set(ids["dev"]) & set(ids["devb"])
    assert not set(ids["heldout"]) & (set(ids["dev"]) | set(ids["devb"]))
    assert set(ids["exclude"]) == set(ids["heldout"]) | set(ids["dev"]) | set(ids["devb"])
    devb = [json.loads(ln)["id"] for ln in (out / "devb.jsonl").read_text().splitlines()]
    assert devb == ids["devb"]
