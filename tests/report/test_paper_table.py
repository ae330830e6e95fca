"""``marag table``: the rows a paper's table maps to, the cells beside the published numbers,
and one real run (embedded SmolLM2, fixture questions) with a row that fails alone."""

from __future__ import annotations

import csv
import io
import textwrap

import pytest

from marag.llm.trained import ROLE_LLM
from marag.report import paper_table as pt

PAPER = textwrap.dedent("""
    paper: demo
    title: "A demo table"
    table: "Table 9"
    setting: {backbone: "Qwen2.5-7B-Instruct", retriever: "E5 over wiki-18", top_k: 3,
              metrics: [em, f1]}
    datasets: [nq, hotpotqa, popqa, avg]
    rows:
      - {label: "LLM w/o RAG", method: llm-only, values: {nq: {em: 20.1, f1: 25.0}}}
      - {label: "Vanilla RAG", method: vanilla, values: {nq: {em: 30.0, f1: 35.5},
                                                          hotpotqa: {em: 20.0, f1: 28.0}}}
      - {label: "Self-RAG", method: self-rag, values: {nq: {em: 10.0, f1: 12.0}}}
      - {label: "JADE", method: jade, values: {hotpotqa: {em: 40.0, f1: 50.0}}}
      - {label: "Other", method: null, values: {}}
""")


@pytest.fixture
def demo(tmp_path, monkeypatch):
    papers = tmp_path / "papers"
    papers.mkdir()
    (papers / "demo.yaml").write_text(PAPER)
    monkeypatch.setattr(pt, "PAPERS_DIR", papers)
    return pt.load_paper("demo")


def test_rows_map_to_methods_or_say_why_not(demo):
    plans = {p.row.label: p for p in pt.plan_rows(demo, "smollm2")}
    assert plans["LLM w/o RAG"].method == "llm-only"
    assert plans["Vanilla RAG"].method == "vanilla" and plans["Vanilla RAG"].adapter is None
    assert plans["Self-RAG"].method is None and "checkpoints" in plans["Self-RAG"].reason
    assert plans["JADE"].method is None and "no trained jade adapter" in plans["JADE"].reason
    assert plans["Other"].method is None
    qwen = {p.row.label: p for p in pt.plan_rows(demo, "qwen2.5-coder-0.5b")}
    assert (qwen["JADE"].method, qwen["JADE"].adapter) == ("jade", "qwen-jade")
    given = {p.row.label: p for p in pt.plan_rows(demo, "smollm2", {"jade": "runs/x/policy"})}
    assert given["JADE"].adapter == "runs/x/policy"
    with pytest.raises(ValueError, match="known: demo"):
        pt.load_paper("nope")


def test_cells_put_the_published_number_beside_marag(demo):
    plans = pt.plan_rows(demo, "smollm2")
    cells = {("Vanilla RAG", "nq"): pt.Cell(20, {"em": 0.25, "f1": 0.3125},
                                            {"llm_calls": 1, "total_tokens": 700,
                                             "retrieval_calls": 1, "seconds": 2.0}),
             ("Vanilla RAG", "hotpotqa"): pt.Cell(0, {}, error="RuntimeError: boom"),
             ("LLM w/o RAG", "nq"): pt.Cell(20, {"em": 0.1, "f1": 0.2}, {})}
    md, text = pt.render(demo, plans, cells, ["nq", "hotpotqa"], {"backbone": "smollm2"})
    assert "EM 25.0 (30.0) · F1 31.2 (35.5) · n=20" in md
    assert "failed: RuntimeError: boom" in md
    assert "*not run: Self-RAG needs its released checkpoints" in md
    assert "| backbone | Qwen2.5-7B-Instruct | smollm2 |" in md
    rows = list(csv.DictReader(io.StringIO(text)))
    f1 = next(r for r in rows if r["row"] == "Vanilla RAG" and r["dataset"] == "nq"
              and r["metric"] == "f1")
    assert (f1["marag"], f1["paper"], f1["n"]) == ("31.25", "35.5", "20")
    assert any(r["row"] == "Self-RAG" and r["note"].startswith("Self-RAG needs") for r in rows)


def test_marag_table_runs_rows_on_the_datasets_present(demo, tmp_path, qa_data, capsys):
    from marag.cli import main
    from marag.retrieval import build_index

    index = build_index(qa_data / "nq_open.corpus.jsonl", tmp_path / "idx", kind="bm25",
                        show_progress=False)
    out = tmp_path / "table"
    args = ["table", "demo", "--data", str(qa_data), "--index", str(index), "--limit", "2",
            "--rows", "llm-only,vanilla", "--out", str(out), "--no-progress",
            "--set", "method.max_tokens.default=8"]
    assert main(args) == 0
    md = (out / "table.md").read_text()
    assert "| LLM w/o RAG | llm-only |" in md and "n=2" in md
    assert "Not run (no questions file found): popqa." in md
    assert (out / "runs" / "vanilla" / "hotpotqa" / "traces.jsonl").is_file()
    assert (out / "f1_vs_cost.png").is_file()
    # resumable: the same command reruns nothing and writes the same cells
    assert main(args) == 0
    assert (out / "table.md").read_text().split("## Table")[1] == md.split("## Table")[1]


def test_a_rows_wrong_adapter_fails_that_row_before_any_run_folder(demo, tmp_path, qa_data):
    from marag.cli import main

    out = tmp_path / "table"
    assert main(["table", "demo", "--data", str(qa_data), "--index", "wiki-demo",
                 "--rows", "jade", "--adapter", f"jade={tmp_path / 'no-adapter'}",
                 "--out", str(out), "--no-progress"]) == 0
    md = (out / "table.md").read_text()
    assert "failed: ConfigError: llms.default.adapter" in md
    assert not (out / "runs" / "jade").exists()


def test_a_one_role_adapter_set_into_the_shared_llm_stops_the_table(demo, tmp_path, qa_data,
                                                                    capsys):
    """Every row serves its method, so a one-role adapter written into ``llms.default`` (it
    would reach every role) is refused with the fix before any row runs."""
    from marag.cli import main

    out = tmp_path / "table"
    assert main(["table", "demo", "--data", str(qa_data), "--index", "wiki-demo",
                 "--rows", "vanilla", "--set", "llms.default.adapter=[qwen-adaptive]",
                 "--out", str(out), "--no-progress"]) == 2
    assert ("llms.default.adapter names qwen-adaptive, trained for the role adaptive.classify "
            "of adaptive-rag alone" in capsys.readouterr().err)
    assert not (out / "runs").exists()


def test_the_self_rag_row_runs_only_on_its_checkpoint_behind_openai(demo):
    plans = {p.row.label: p for p in pt.plan_rows(demo, "smollm2", backend="hf")}
    assert plans["Self-RAG"].method is None
    assert "smollm2 is not one" in plans["Self-RAG"].reason
    local = {p.row.label: p for p in pt.plan_rows(demo, "selfrag/selfrag_llama2_7b",
                                                 backend="hf")}
    assert local["Self-RAG"].method is None and "openai endpoint" in local["Self-RAG"].reason
    served = {p.row.label: p for p in pt.plan_rows(demo, "selfrag/selfrag_llama2_7b",
                                                  backend="openai")}
    assert served["Self-RAG"].method == "self-rag"
    assert "llms.default.top_logprobs=20" in served["Self-RAG"].overrides
    assert served["Vanilla RAG"].method == "vanilla" and served["Vanilla RAG"].overrides == ()
    # DeepNote runs untrained (M-ASK's had its note roles DPO-trained: docs/fidelity.md)
    assert pt.RUNNABLE["deepnote"] == ("deepnote", None) and not pt.NOT_BUILT


def test_marag_table_runs_the_self_rag_row_on_a_served_checkpoint(demo, tmp_path, qa_data,
                                                                  serve_app):
    from tests.workflows.conftest import scripted_chat_app

    from marag.cli import main
    from marag.retrieval import build_index

    def checkpoint(body):
        if len(body["messages"]) == 1:
            return "[Retrieval]", [{"token": "[Retrieval]", "logprob": -0.1, "top_logprobs": [
                {"token": "[Retrieval]", "logprob": -0.1}]}]
        return "[Relevant]Paris[Fully supported][Utility:5]"

    app, seen = scripted_chat_app(checkpoint)
    index = build_index(qa_data / "nq_open.corpus.jsonl", tmp_path / "idx", kind="bm25",
                        show_progress=False)
    out = tmp_path / "table"
    with serve_app(app) as url:
        assert main(["table", "demo", "--data", str(qa_data), "--index", str(index),
                     "--limit", "1", "--rows", "self-rag", "--llm", url + "/v1",
                     "--model", "selfrag/selfrag_llama2_7b", "--out", str(out),
                     "--no-progress", "--set", "method.self_rag_top_k=2"]) == 0
    md = (out / "table.md").read_text()
    assert "| Self-RAG | self-rag |" in md and "n=1" in md
    # the row's own settings reached the server: probabilities asked for, tokens kept
    assert len(seen) == 2 * 3  # two datasets, one question each: a decision and 2 passages
    assert all(b["top_logprobs"] == 20 and b["skip_special_tokens"] is False for b in seen)


def test_every_default_adapter_is_a_committed_one_for_its_model():
    from marag.llm.trained import TRAINED

    for model, kinds in pt.ADAPTERS.items():
        for kind, name in kinds.items():
            assert name in TRAINED and TRAINED[name].model == model, (model, kind, name)
    sr1 = {p.row.label: p for p in pt.plan_rows(pt.load_paper("jade"), "qwen2.5-coder-0.5b")}
    search_r1 = next(p for label, p in sr1.items() if label.startswith("Search-R1"))
    assert (search_r1.method, search_r1.adapter) == ("search-r1", "qwen-search-r1")


def test_a_role_trained_adapter_serves_that_role_alone():
    from marag.config import ConfigError, load_config

    config = load_config(overrides=["llms.default.model=qwen2.5-coder-0.5b"])
    jade = pt.with_row_adapter(config, "jade", "qwen-jade")
    assert jade.llms["default"].adapter == ["qwen-jade"] and set(jade.llms) == {"default"}
    ada = pt.with_row_adapter(config, "adaptive-rag", "qwen-adaptive")
    # Adaptive-RAG: the classifier takes the adapter; the strategies run the plain backbone
    assert ada.llms["default"].adapter == []
    assert ada.backend_for("adaptive.classify") == ROLE_LLM
    assert ada.llms[ROLE_LLM].adapter == ["qwen-adaptive"]
    assert ada.llms[ROLE_LLM].model == "qwen2.5-coder-0.5b"
    assert ada.backend_for("AG") == ada.backend_for("ircot") == "default"
    assert config.llms["default"].adapter == []  # the row's config is a copy
    assert pt.with_row_adapter(ada, "adaptive-rag", "qwen-adaptive") is ada  # made for it
    with pytest.raises(ConfigError, match="llms.trained is taken"):
        pt.with_row_adapter(ada, "adaptive-rag", "another-classifier")
    # MAO-ARAG: the planner is trained, its executors ran the untrained model
    mao = pt.with_row_adapter(config, "mao-arag", "qwen-mao-arag")
    assert mao.backend_for("planner") == ROLE_LLM
    assert mao.llms[ROLE_LLM].adapter == ["qwen-mao-arag"]
    assert mao.backend_for("AG") == mao.backend_for("QR") == "default"
    assert mao.llms["default"].adapter == []


@pytest.mark.parametrize("paper", ["jade", "m-ask", "mao-arag", "mmoa-rag"])
def test_every_trained_row_passes_the_served_run_check(paper):
    """``marag table`` checks each row's config as a served run's; a row with its default
    adapter (the one-role ones included) must pass it, or it would fail as an error cell."""
    from marag.config import load_config
    from marag.llm.trained import misplaced_role_adapters

    table = pt.load_paper(paper)
    plans = [p for p in pt.plan_rows(table, "qwen2.5-coder-0.5b") if p.adapter]
    assert plans  # each paper has rows with trained adapters on this model
    for plan in plans:
        config = load_config(overrides=["llms.default.model=qwen2.5-coder-0.5b",
                                         *plan.overrides, f"method.name={plan.method}"])
        row = pt.with_row_adapter(config, plan.row.method, plan.adapter)
        assert misplaced_role_adapters(row) == [], plan.row.label


def test_a_one_role_row_serves_its_other_roles_with_its_runs_frozen_adapters(monkeypatch):
    from marag.config import load_config
    from marag.llm.trained import TRAINED, TrainedAdapter

    # RRR: the rewriter trained beside a generator from the SFT (MMOA-RAG S5.1.3)
    monkeypatch.setitem(TRAINED, "rewriter", TrainedAdapter(
        "qwen2.5-coder-0.5b", ("docs/sft", "docs/rl"), team=("generator-sft",)))
    config = load_config(overrides=["llms.default.model=qwen2.5-coder-0.5b"])
    rrr = pt.with_row_adapter(config, "rrr", "rewriter")
    assert rrr.backend_for("mmoa.QR") == ROLE_LLM
    assert rrr.llms[ROLE_LLM].adapter == ["rewriter"]
    assert rrr.backend_for("AG") == "default"
    assert rrr.llms["default"].adapter == ["generator-sft"]
    # a folder (no registration, so no record of the run's team): the others stay untrained
    bgm = pt.with_row_adapter(config, "bgm", "runs/train/bgm/policy")
    assert bgm.backend_for("DS") == ROLE_LLM
    assert bgm.llms[ROLE_LLM].adapter == ["runs/train/bgm/policy"]
    assert bgm.llms["default"].adapter == []


def test_a_registered_one_role_adapter_names_the_role_its_row_serves():
    from marag.llm.trained import TRAINED

    for kinds in pt.ADAPTERS.values():
        for kind, name in kinds.items():
            assert TRAINED[name].role == pt.ADAPTER_ROLES.get(kind), (kind, name)
            if TRAINED[name].role is not None:  # the row's method is the one it trained in
                assert pt.RUNNABLE[kind][0] == TRAINED[name].method, (kind, name)
    with pytest.raises(Exception, match="the mao-arag row was given qwen-rrr, trained for "
                                        "rrr's mmoa.QR role alone"):
        from marag.config import load_config

        pt.with_row_adapter(load_config(overrides=["llms.default.model=qwen2.5-coder-0.5b"]),
                            "mao-arag", "qwen-rrr")


def test_an_adapter_for_a_row_that_takes_none_is_refused(demo, tmp_path, qa_data, capsys):
    from marag.cli import main

    assert pt.stray_adapters(demo, {"jade": "qwen-jade"}) == ""
    problem = pt.stray_adapters(demo, {"vanilla": "x", "nope": "y"})
    assert "--adapter vanilla, nope" in problem and "the rows that do: jade" in problem
    assert pt.stray_adapters(demo, {"jade": "x"}, {"vanilla"}) == (
        "--adapter jade: not among the rows asked for (--rows)")
    assert pt.stray_adapters(demo, {"jade": "x"}, {"vanilla", "jade"}) == ""
    out = tmp_path / "table"
    assert main(["table", "demo", "--data", str(qa_data), "--index", "wiki-demo",
                 "--adapter", f"vanilla={tmp_path}", "--out", str(out), "--no-progress"]) == 2
    assert "no row of demo by that name takes an adapter" in capsys.readouterr().err
    assert not out.exists()
