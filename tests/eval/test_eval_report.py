"""marag report over real run directories: the comparison table and the PNG plots."""

from __future__ import annotations

import json
from types import SimpleNamespace

from tiny_method import first_title_answer, tiny_rag

from marag.cli import main
from marag.eval import evaluate
from marag.llm.scripted import ScriptedLLM
from marag.report import build_report

PNG = b"\x89PNG\r\n\x1a\n"


async def _runs(tmp_path, nq_questions, ctx_factory):
    rag = tmp_path / "rag"
    await evaluate(nq_questions, tiny_rag, ctx_factory(ScriptedLLM({"AG": first_title_answer})),
                   rag, method_name="tiny-rag", identity={"dataset": "nq_open"})
    # Without retrieval the scripted model has nothing to copy: a baseline that scores 0.
    bare = SimpleNamespace(llm=ScriptedLLM({"AG": "<answer>unknown</answer>"}), retriever=None)
    llm_only = tmp_path / "llm-only"
    await evaluate(nq_questions, tiny_rag, bare, llm_only, method_name="no-docs",
                   identity={"dataset": "nq_open"})
    return rag, llm_only


async def test_report_table_and_plots(tmp_path, nq_questions, ctx_factory):
    rag, llm_only = await _runs(tmp_path, nq_questions, ctx_factory)
    report = build_report([rag, llm_only], tmp_path / "report")
    assert [r.label for r in report.rows] == ["tiny-rag", "no-docs"]
    lines = report.markdown.splitlines()
    header = next(line for line in lines if line.startswith("| method | nq_open EM"))
    assert "| retrievals |" in header and "| tokens |" in header
    rag_f1 = 100 * json.loads((rag / "metrics.json").read_text())["f1"]
    rag_row = next(line for line in lines if line.startswith("| tiny-rag |"))
    assert f"| {rag_f1:.2f} |" in rag_row
    assert next(line for line in lines if line.startswith("| no-docs |")).startswith(
        "| no-docs | 0.00 | 0.00 | 0.00 | 12 | 0 |")
    out = tmp_path / "report"
    assert set(report.files) == {"report.md", "summary.json", "f1_vs_cost.png", "workflows.png",
                                 "role_validity.png"}
    for name in ("f1_vs_cost.png", "workflows.png", "role_validity.png"):
        data = (out / name).read_bytes()
        assert data[:8] == PNG and len(data) > 10_000, name
    summary = json.loads((out / "summary.json").read_text())
    assert summary["no-docs"]["workflows"] == {"AG": 12}
    assert summary["tiny-rag"]["workflows"] == {"R,AG": 12}


async def test_same_method_on_two_datasets_shares_a_row(tmp_path, nq_questions, ctx_factory):
    llm = ScriptedLLM({"AG": first_title_answer})
    for name, qs, ds in (("a", nq_questions[:4], "nq_open"), ("b", nq_questions[4:8], "other")):
        for q in qs:
            q.dataset = ds
        await evaluate(qs, tiny_rag, ctx_factory(llm), tmp_path / name, method_name="tiny-rag")
    again = tmp_path / "c"
    await evaluate(nq_questions[:4], tiny_rag, ctx_factory(llm), again, method_name="tiny-rag")
    report = build_report([tmp_path / "a", tmp_path / "b", again], None)
    assert [r.label for r in report.rows] == ["tiny-rag (a+b)", "tiny-rag (c)"]
    assert list(report.rows[0].summary["datasets"]) == ["nq_open", "other"]
    assert report.files == [] and report.out_dir is None


async def test_pooled_f1_vs_cost_puts_every_run_on_one_plot(tmp_path, nq_questions,
                                                              ctx_factory):
    from marag.report.plots import cost_points

    _, llm_only = await _runs(tmp_path / "x", nq_questions[:8], ctx_factory)  # nq_open only
    llm = ScriptedLLM({"AG": first_title_answer})
    for name, qs, ds in (("a", nq_questions[:4], "nq_open"), ("b", nq_questions[4:8], "other")):
        for q in qs:
            q.dataset = ds
        await evaluate(qs, tiny_rag, ctx_factory(llm), tmp_path / name, method_name="tiny-rag")
    report = build_report([tmp_path / "a", tmp_path / "b", llm_only], tmp_path / "r")
    assert "f1_vs_cost_all.png" in report.files
    assert (tmp_path / "r" / "f1_vs_cost_all.png").read_bytes()[:8] == PNG
    rag, none = report.rows
    # pooled over the datasets every run has (nq_open): the rag run's "other" questions are
    # left out, so both points stand on the same questions
    pooled = cost_points(report.rows, "llm_calls")
    nq = rag.summary["datasets"]["nq_open"]
    assert pooled[(round(nq["cost"]["llm_calls"], 9), round(100 * nq["f1"], 9))] == ["tiny-rag"]
    assert sum(len(v) for v in pooled.values()) == 2
    assert rag.summary["f1"] != nq["f1"]  # its pooled point is not its own mean over both
    # per dataset: the rag run has a point on each, the llm-only run (nq_open only) on one
    per = [cost_points(report.rows, "retrieval_calls", d) for d in ("nq_open", "other")]
    assert [sorted(x for v in p.values() for x in v) for p in per] == [
        ["no-docs", "tiny-rag"], ["tiny-rag"]]
    # runs over the same datasets: the pooled point is each run's own overall mean
    same = build_report([tmp_path / "a", tmp_path / "b"], None).rows
    (only,) = same
    assert cost_points(same, "llm_calls") == {
        (round(only.summary["cost"]["llm_calls"], 9), round(100 * only.summary["f1"], 9)):
        ["tiny-rag"]}
    assert none.label == "no-docs"


async def test_report_command_prints_and_writes(tmp_path, nq_questions, ctx_factory, capsys):
    rag, llm_only = await _runs(tmp_path, nq_questions, ctx_factory)
    assert main(["report", str(rag), str(llm_only), "--out", str(tmp_path / "r"),
                 "--no-plots"]) == 0
    printed = capsys.readouterr().out
    assert "| tiny-rag |" in printed and "wrote report.md, summary.json" in printed
    assert not list((tmp_path / "r").glob("*.png"))
    assert main(["report", str(tmp_path / "missing")]) == 2
