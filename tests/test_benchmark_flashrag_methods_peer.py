"""benchmarks/flashrag_methods_peer.py: the `table` subcommand pairs FlashRAG's IRCoT
predictions with a marag run by id, rescores both with marag.metrics, splits by dataset,
takes the speed ratio from the two whole-run walls, and counts a reported score that
marag.metrics does not reproduce; `run` refuses Search-o1 with the reason."""

from __future__ import annotations

import json
import sys

import pytest

from marag.metrics import score
from marag.types import Trace, write_jsonl
from test_benchmark_plan_scripts import load

QUESTIONS = [  # id, dataset, gold, FlashRAG's prediction, marag's answer
    ("a", "hotpotqa", "Paris", "Paris.", "It is Paris"),
    ("b", "musique", "1889", "1890", "1889"),
]


def _write(tmp_path, tamper=False):
    fr = tmp_path / "fr"
    fr.mkdir()
    with (fr / "predictions.jsonl").open("w") as f:
        for qid, ds, gold, pred, _ in QUESTIONS:
            s = score(pred, [gold])
            if tamper and qid == "b":
                s["f1"] = 0.5
            f.write(json.dumps({"id": qid, "dataset": ds, "golden_answers": [gold], "pred": pred,
                                "em": s["em"], "f1": s["f1"], "acc": s["acc"], "wall_s": 20.0,
                                "llm_calls": 2, "retrieval_calls": 3,
                                "prompt_tokens": 1000}) + "\n")
    (fr / "result.json").write_text(json.dumps({"timing": {"run_s": 40.0, "process_wall_s": 50.0}}))
    run = tmp_path / "marag"
    run.mkdir()
    write_jsonl(run / "traces.jsonl", [
        Trace(id=qid, question=qid, method="ircot", golden_answers=[gold], dataset=ds,
              answer=ans, metrics=score(ans, [gold]))
        for qid, ds, gold, _, ans in QUESTIONS])
    (tmp_path / "wall.json").write_text(json.dumps({"run_s": 10.0}))
    return fr, run


def _table(monkeypatch, tmp_path, fr, run):
    mod = load("flashrag_methods_peer")
    out = tmp_path / "t.json"
    monkeypatch.setattr(sys, "argv", ["x", "table", "--flashrag", str(fr), "--marag", str(run),
                                      "--marag-wall", str(tmp_path / "wall.json"),
                                      "--md", str(tmp_path / "t.md"), "--json", str(out),
                                      "--marag-predictions", str(tmp_path / "p.jsonl")])
    mod.main()
    return {(r["group"], r["system"].split()[0]): r for r in json.loads(out.read_text())}


def test_table_rescores_both_sides_and_takes_the_speed_from_the_walls(monkeypatch, tmp_path):
    fr, run = _write(tmp_path)
    rows = _table(monkeypatch, tmp_path, fr, run)
    f, m = rows[("all", "FlashRAG")], rows[("all", "marag")]
    assert (f["em"], f["acc"]) == (50.0, 50.0)
    assert m["acc"] == 100.0 and m["em"] == 50.0
    assert m["speed_ratio"] == pytest.approx(40.0 / 10.0)
    assert rows[("musique", "marag")]["n"] == 1 and "speed_ratio" not in rows[("musique", "marag")]
    assert f["disagree_flashrag_metric"] == 0 == m["disagree_flashrag_metric"]
    assert len((tmp_path / "p.jsonl").read_text().splitlines()) == 2


def test_a_score_marag_metrics_does_not_reproduce_is_counted(monkeypatch, tmp_path):
    fr, run = _write(tmp_path, tamper=True)
    rows = _table(monkeypatch, tmp_path, fr, run)
    assert rows[("all", "FlashRAG")]["disagree_flashrag_metric"] == 1
    assert "on 1 (question, metric) pairs" in (tmp_path / "t.md").read_text()


def test_search_o1_is_refused_with_the_reason(monkeypatch, tmp_path):
    mod = load("flashrag_methods_peer")
    monkeypatch.setattr(sys, "argv", ["x", "run", "q.jsonl", str(tmp_path), "--corpus", "c",
                                      "--model", "m", "--methods", "search-o1"])
    with pytest.raises(SystemExit, match="no reasoning pipelines"):
        mod.main()
