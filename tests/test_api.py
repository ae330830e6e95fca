"""marag.ask / ask_async / build_context, and the ``marag ask`` command's pieces."""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path

import pytest

import marag
from marag.api import ask_async, build_context, resolve_config
from marag.config import Config, ConfigError, load_config
from marag.llm.scripted import ScriptedLLM
from marag.types import Trace
from marag.view.text import render_trace


@pytest.fixture(scope="module")
def nq_index(qa_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    from marag.retrieval import build_index

    out = tmp_path_factory.mktemp("nq_bm25") / "idx"
    build_index(qa_data / "nq_open.corpus.jsonl", out, kind="bm25")
    return out


def _scripted() -> ScriptedLLM:
    return ScriptedLLM({"planner": "<workflow>R, DS, AG</workflow>", "DS": "<id>0</id>",
                        "AG": "<answer>Paris</answer>"})


def test_resolve_config_from_object_path_and_overrides(tmp_path):
    base = Config()
    assert resolve_config(base) is base
    changed = resolve_config(base, ["method.max_rounds=3"])
    assert changed.method.max_rounds == 3 and base.method.max_rounds == 8
    p = tmp_path / "c.yaml"
    p.write_text("method:\n  name: vanilla\n")
    assert resolve_config(p, ["method.top_k=2"]).method.top_k == 2
    with pytest.raises(ConfigError, match="max_round"):
        resolve_config(base, ["method.max_round=3"])


def test_build_context_opens_the_configured_index_only_when_needed(nq_index):
    llm = _scripted()
    cfg = load_config(None, [f"retrieval.index={nq_index}", "method.name=llm-only"])
    assert build_context(cfg, llms={"default": llm}).retriever is None
    cfg = load_config(None, [f"retrieval.index={nq_index}"])
    ctx = build_context(cfg, llms={"default": llm})
    assert ctx.retriever is not None
    hits = ctx.retriever.search_batch(["who sang the song"], 3)
    assert len(hits[0].passages) == 3
    bad = load_config(None, ["retrieval.index=/nonexistent/index"])
    with pytest.raises(Exception, match="nonexistent"):
        build_context(bad, llms={"default": llm})


async def test_ask_async_with_a_shared_context(nq_index):
    cfg = load_config(None, [f"retrieval.index={nq_index}", "method.top_k=3"])
    llm = _scripted()
    ctx = build_context(cfg, llms={"default": llm})
    t = await ask_async("what is the capital of france", context=ctx, golden_answers=["Paris"],
                        id="x1")
    assert isinstance(t, Trace) and t.id == "x1" and t.method == "jade"
    assert t.answer == "Paris" and t.metrics["em"] == 1.0
    assert [s.role for s in t.steps] == ["planner", "R", "DS", "AG"]
    assert len(t.steps[1].doc_ids) == 3
    t2 = await ask_async("what is the capital of france", context=ctx, method="llm-only")
    assert t2.method == "llm-only" and [s.role for s in t2.steps] == ["AG"]
    with pytest.raises(ConfigError, match="unknown method"):
        await ask_async("q", context=ctx, method="rag")
    with pytest.raises(TypeError, match="golden"):
        await ask_async("q", context=ctx, golden=["x"])
    with pytest.raises(ValueError, match="not both"):
        await ask_async("q", context=ctx, config=cfg)


def test_sync_ask_through_the_package_entry_point(nq_index):
    cfg = load_config(None, [f"retrieval.index={nq_index}"])
    ctx = build_context(cfg, llms={"default": _scripted()})
    t = marag.ask("what is the capital of france", context=ctx, method="vanilla")
    assert t.status == "ok" and t.answer == "Paris" and [s.role for s in t.steps] == ["R", "AG"]


def test_render_trace_shows_agents_nodes_documents_and_problems(nq_index):
    cfg = load_config(None, [f"retrieval.index={nq_index}"])
    llm = ScriptedLLM({"planner": ["<workflow>QDP</workflow>", "<workflow>R, AG</workflow>",
                                   "not a plan"],
                       "QDP": "<q1>capital of France?</q1><q2>capital of Spain?</q2>",
                       "AG": lambda m: "<answer>Paris</answer>" if "France?" in m[-1]["content"]
                       else "<answer>Madrid</answer>",
                       "AS": "<answer>Paris and Madrid</answer>"})
    ctx = build_context(cfg, llms={"default": llm})
    t = asyncio.run(ask_async("What are the capitals of France and Spain?", context=ctx))
    text = render_trace(t)
    assert "A: Paris and Madrid" in text
    assert "#1 (parallel) capital of France? → Paris  [R, AG]" in text
    assert "#2 (parallel) capital of Spain? → Madrid  [R, AG]" in text
    assert "✗ invalid output" in text and "note: node 2: invalid plan" in text
    # AS ran after the children and is printed after them
    assert text.index("#2 (parallel)") < text.index("round 3  AS")
    r = next(s for s in t.steps if s.role == "R")
    assert r.doc_ids[0] in text and f"{len(r.doc_ids)} docs" in text
    assert "\033[" not in text and "\033[" in render_trace(t, color=True)
    # the JSON form round-trips
    assert Trace.from_dict(json.loads(json.dumps(t.to_dict()))).to_dict() == t.to_dict()


def test_ask_command_flags_become_overrides():
    from marag.cli import build_parser
    from marag.commands.ask import flag_overrides

    args = build_parser().parse_args([
        "ask", "who?", "--method", "vanilla", "--llm", "http://127.0.0.1:8000/v1", "--model",
        "qwen", "--index", "wiki-demo", "--k", "3", "--set", "method.top_k=4", "--json"])
    assert isinstance(args, argparse.Namespace) and args.json and args.question == "who?"
    ov = flag_overrides(args)
    cfg = load_config(None, ov)
    # --k is method.top_k; the later --set wins
    assert ov.index("method.top_k=3") < ov.index("method.top_k=4")
    assert cfg.method.name == "vanilla" and cfg.method.top_k == 4
    assert cfg.llms["default"].backend == "openai" and cfg.llms["default"].model == "qwen"
    assert cfg.llms["default"].base_url == "http://127.0.0.1:8000/v1"
    with pytest.raises(SystemExit):
        build_parser().parse_args(["ask", "q", "--json", "--quiet"])


def test_ask_command_reports_a_dead_endpoint(capsys):
    from marag.cli import main

    args = ["ask", "Who wrote Hamlet?", "--method", "llm-only", "--llm", "http://127.0.0.1:9/v1",
            "--set", "llms.default.retries=0", "--set", "llms.default.timeout=2"]
    assert main(args) == 1
    out = capsys.readouterr().out
    assert "llm-only · failed" in out and "error: LLMError" in out and "127.0.0.1:9" in out
    assert main([*args, "--json"]) == 1
    captured = capsys.readouterr()
    t = Trace.from_dict(json.loads(captured.out))
    assert t.status == "failed" and t.answer is None and "127.0.0.1:9" in t.error
    assert "marag ask: failed" in captured.err


def test_ask_command_config_errors_exit_2(capsys):
    from marag.cli import main

    assert main(["ask", "q", "--set", "method.max_roundz=2"]) == 2
    assert "max_rounds" in capsys.readouterr().err


@pytest.mark.parametrize("question", ["", "   ", "\n\t", "\u0085", "\ufeff"])
def test_ask_command_refuses_an_empty_question(capsys, question):
    from marag.cli import main

    # exits before loading a model or an index (llm-only on a dead endpoint would exit 1)
    assert main(["ask", question, "--method", "llm-only", "--llm", "http://127.0.0.1:9/v1"]) == 2
    err = capsys.readouterr().err
    assert "marag ask: the question is empty" in err


async def test_ask_async_refuses_an_empty_question(nq_index):
    cfg = load_config(None, [f"retrieval.index={nq_index}"])
    ctx = build_context(cfg, llms={"default": _scripted()})
    for question in ("", "  \n", "\u0085 \ufeff"):
        with pytest.raises(ValueError, match="the question is empty"):
            await ask_async(question, context=ctx)
    assert ctx.llms["default"].calls == []  # type: ignore[attr-defined]


def test_a_misspelt_role_fails_before_any_model_loads(capsys, tmp_path):
    from marag.cli import main

    p = tmp_path / "c.yaml"
    p.write_text("llms: {policy: {backend: hf}, default: {backend: hf}}\n"
                 "roles: {planer: policy, default: default}\n")
    assert main(["ask", "who?", "--config", str(p)]) == 2
    err = capsys.readouterr().err
    assert "unknown role 'roles.planer' (did you mean 'planner'?)" in err
    assert main(["eval", "--dataset", "nq_open", "--config", str(p),
                 "--out", str(tmp_path / "run")]) == 2
    assert "did you mean 'planner'?" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()  # refused before the run directory was made
