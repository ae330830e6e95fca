"""benchmarks/plan_costs.py: per-type savings, the per-question oracle and the greedy type
rule, on real trace files of two fixed plans."""

from __future__ import annotations

import json

import pytest

from marag.types import Cost, Trace, write_jsonl
from test_benchmark_plan_scripts import load


def _run(tmp_path, name, rows):
    d = tmp_path / name
    d.mkdir()
    write_jsonl(d / "traces.jsonl", [
        Trace(id=i, question=f"q {i}", method="m", metrics={"f1": f},
              cost=Cost(prompt_tokens=tok, completion_tokens=0))
        for i, (f, tok) in rows.items()])
    return d


def test_types_oracle_and_rule(tmp_path, capsys):
    pc = load("plan_costs")
    # type x: the cheap plan as good (F1 0.5 both); type y: retrieval needed (0 vs 1)
    cheap = _run(tmp_path, "cheap", {"1": (0.5, 100), "2": (0.5, 100), "3": (0.0, 100),
                                     "4": (0.0, 100)})
    dear = _run(tmp_path, "dear", {"1": (0.5, 700), "2": (0.5, 700), "3": (1.0, 700),
                                   "4": (1.0, 700)})
    qs = tmp_path / "q.jsonl"
    qs.write_text("".join(json.dumps({"id": i, "dataset": "d", "type": t}) + "\n"
                          for i, t in (("1", "x"), ("2", "x"), ("3", "y"), ("4", "y"))),
                  encoding="utf-8")
    pc.main([str(cheap), str(dear), "--questions", str(qs), "--json"])
    out = json.loads(capsys.readouterr().out)
    assert out["dear_f1"] == pytest.approx(75.0) and out["dear_tokens"] == 700
    x, y = out["types"]
    assert (x["type"], x["f1_lost"], x["tokens_saved"]) == ("d/x", 0.0, pytest.approx(42.857, 1e-3))
    assert y["f1_lost"] == pytest.approx(50.0)
    assert out["oracle"]["cheap_on"] == 2 and out["oracle"]["f1_share"] == pytest.approx(1.0)
    rule = out["types_rule"]  # x is free; y would keep only 1/3 of the F1
    assert rule["cheap_types"] == ["d/x"] and rule["tokens_saved"] == pytest.approx(42.857, 1e-3)
    pc.main([str(cheap), str(dear), "--questions", str(qs)])
    assert "types rule (keep 95%): cheap on d/x; F1 75.0 (100.0% of dear's), 43% fewer" \
        in capsys.readouterr().out


def test_runs_of_different_questions_are_refused(tmp_path):
    pc = load("plan_costs")
    a = _run(tmp_path, "a", {"1": (0.0, 10)})
    b = _run(tmp_path, "b", {"2": (0.0, 10)})
    qs = tmp_path / "q.jsonl"
    qs.write_text("", encoding="utf-8")
    with pytest.raises(SystemExit, match="different questions"):
        pc.main([str(a), str(b), "--questions", str(qs)])
