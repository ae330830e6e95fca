"""benchmarks/side_by_side_table.py --paired: FlashRAG's and marag's per-question scores are
paired by id, split by the question's dataset (one pooled run gives a row per dataset), the
difference is marag - FlashRAG, and a reported score that marag.metrics does not reproduce
is printed rather than hidden."""

from __future__ import annotations

import json

import pytest

from marag.metrics import score
from marag.types import Trace, write_jsonl
from test_benchmark_plan_scripts import load

QUESTIONS = [  # id, dataset, gold, FlashRAG's prediction, marag's answer
    ("a", "nq_open", "Paris", "It is Paris.", "Paris"),
    ("b", "nq_open", "1889", "1889", "1890"),
    ("c", "hotpotqa", "yes", "no", "yes"),
    ("d", "hotpotqa", "Gustave Eiffel", "Eiffel", "Gustave Eiffel"),
]


def _write(out, name, marag_dir=None, tamper=False):
    fr = out / f"flashrag-{name}" / "rag"
    fr.mkdir(parents=True)
    with (fr / "predictions.jsonl").open("w") as f:
        for qid, _, gold, pred, _ in QUESTIONS:
            s = score(pred, [gold])
            if tamper and qid == "b":
                s["f1"] = 0.5
            f.write(json.dumps({"id": qid, "golden_answers": [gold], "pred": pred,
                                "em": s["em"], "f1": s["f1"], "acc": s["acc"]}) + "\n")
    run = marag_dir or out / f"marag-{name}"
    run.mkdir(parents=True)
    write_jsonl(run / "traces.jsonl", [
        Trace(id=qid, question=qid, method="vanilla", golden_answers=[gold], dataset=ds,
              answer=ans, metrics=score(ans, [gold]))
        for qid, ds, gold, _, ans in QUESTIONS])


def _row(text, name):
    return next(line for line in text.splitlines() if line.startswith(f"| {name} |"))


def test_paired_rows_split_by_dataset_with_marag_minus_flashrag(tmp_path):
    table = load("side_by_side_table")
    _write(tmp_path / "own", "pooled")
    text = table.main(["--paired", str(tmp_path / "own")])
    nq = _row(text, "nq_open").split(" | ")
    # FlashRAG: acc 1 + 1, EM 0 + 1; marag: EM/acc 1 + 0
    assert nq[1:8] == ["2", "50.0", f"{100 * (0.5 + 1) / 2:.1f}", "100.0", "50.0", "50.0", "50.0"]
    hp = _row(text, "hotpotqa").split(" | ")
    assert hp[1] == "2" and hp[-1] == "yes / yes |"  # marag ahead on both
    assert "+" in hp[8] and "+" in hp[9]
    assert _row(text, "**overall**").split(" | ")[1] == "4"
    assert "rescoring mismatches" not in text


def test_paired_takes_another_marag_run_and_reports_rescoring_mismatches(tmp_path):
    table = load("side_by_side_table")
    _write(tmp_path / "out", "pooled", marag_dir=tmp_path / "earlier", tamper=True)
    text = table.main(["--paired", str(tmp_path / "out"), "--marag",
                       f"pooled={tmp_path / 'earlier'}"])
    assert "pooled/b: FlashRAG's reported ['f1']" in text
    with pytest.raises(SystemExit):  # marag-pooled does not exist without --marag
        table.main(["--paired", str(tmp_path / "out")])
