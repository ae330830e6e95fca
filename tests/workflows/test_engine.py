"""The Run's own duties: a blank question is a recorded failure, answers are written in one way,
roles take their inputs only, and a misspelt role in ``roles:`` stops the run before it starts."""

from __future__ import annotations

import pytest

from marag.config import ConfigError
from marag.eval import evaluate
from marag.llm.scripted import ScriptedLLM
from marag.metrics import score
from marag.roles import get_role
from marag.types import EMPTY_QUESTION, Passage, Question
from marag.workflows import METHODS, Run, run_method


@pytest.mark.parametrize("method", sorted(METHODS))
async def test_a_blank_question_is_a_failed_trace_without_calls(method, hotpot_retriever, ctx_for):
    llm = ScriptedLLM({"AG": "<answer>made up</answer>"})
    t = await run_method(method, Question("e1", "  \n \ufeff\u0085", ["x"], "hotpotqa"),
                         ctx_for(llm, hotpot_retriever))
    assert (t.status, t.error, t.answer, t.steps) == ("failed", EMPTY_QUESTION, None, [])
    assert (t.id, t.golden_answers, t.dataset, t.method) == ("e1", ["x"], "hotpotqa", method)
    assert llm.calls == [] and t.cost.llm_calls == 0 and t.cost.retrieval_calls == 0


async def test_evaluate_records_a_blank_question_as_one_failed_item(
        tmp_path, hotpot_retriever, ctx_for):
    llm = ScriptedLLM({"AG": "<answer>Chief of Protocol</answer>"})
    ctx = ctx_for(llm, hotpot_retriever)
    qs = [Question("ok", "What position did Shirley Temple hold?", ["Chief of Protocol"]),
          Question("blank", " ", ["x"])]
    res = await evaluate(qs, METHODS["llm-only"], ctx, tmp_path / "run", method_name="llm-only")
    assert (res.summary["n"], res.summary["failed"], res.summary["em"]) == (2, 1, 0.5)


async def test_run_answer_coerces_once_and_the_root_answer_is_the_traces(ctx_for):
    run = Run(ctx_for(ScriptedLLM({}), None), Question("a1", "q?", ["4"]), "test")
    root = run.add_node("q?")
    child = run.add_node("sub?", parent=root, kind="serial")
    assert run.answer(child, None) == "" and child.solved and run.trace.answer is None
    assert run.answer(root, 4) == "4" and root.solved and run.trace.answer == "4"
    assert run.answer(root, "Paris") == "Paris" and run.trace.answer == "Paris"


async def test_roles_derive_their_parse_context_from_their_inputs(ctx_for):
    docs = [Passage(str(i), f"t{i}", "text") for i in range(3)]
    llm = ScriptedLLM({"DS": ["<id>0, 2</id>", "<id>0, 3</id>"],
                       "planner": "<workflow>QDS</workflow>",
                       "mask.update": "<Update>t2</Update>"})
    run = Run(ctx_for(llm, None), Question("r1", "q?"), "test")
    ok, _ = await run.call("DS", question="q?", docs=docs)
    bad, step = await run.call("DS", question="q?", docs=docs)
    assert (ok.value, ok.valid) == ([0, 2], True)
    assert (bad.value, bad.valid, bad.reason) == ([0], False, "id(s) out of range 0..2: 3")
    assert step.reason == bad.reason
    plan, _ = await run.call("planner", question="q?", allow_decompose=False)
    assert not plan.valid and "not allowed at this depth" in plan.reason
    upd, _ = await run.call("mask.update", question="q?", state=[["a", "b"]], query="c",
                            evidence="d")
    assert not upd.valid and "out of range 1..1" in upd.reason  # one pair: t2 is no pair


def test_role_constraint_comes_from_the_inputs():
    ds = get_role("DS")
    docs = [Passage("a", "A", "x"), Passage("b", "B", "y")]
    assert ds.constraint({"question": "q", "docs": docs})[-4:] == ("0", "1", " 0", " 1")
    with pytest.raises(ValueError, match="no decoding constraint"):
        get_role("AG").constraint({"question": "q"})


def test_a_role_map_key_that_is_no_role_is_refused(ctx_for):
    with pytest.raises(ConfigError, match=r"roles.planer' \(did you mean 'planner'\?\)"):
        ctx_for(ScriptedLLM({}), None, "roles.planer=default")
    with pytest.raises(ConfigError, match=r"roles.mask\.serch' \(did you mean 'mask\.search'\?\)"):
        ctx_for(ScriptedLLM({}), None, "roles.mask.serch=default")
    ctx = ctx_for(ScriptedLLM({}), None, "roles.mask.search=default", "roles.default=default")
    assert ctx.config.roles["mask.search"] == "default"


async def test_trace_metrics_come_from_the_one_scorer(hotpot_retriever, ctx_for):
    llm = ScriptedLLM({"AG": "<answer>the Chief of Protocol</answer>"})
    q = Question("m1", "What position did Shirley Temple hold?", ["Chief of Protocol"])
    t = await run_method("llm-only", q, ctx_for(llm, hotpot_retriever))
    assert t.metrics == score("the Chief of Protocol", ["Chief of Protocol"])


async def test_stop_when_is_refused_where_a_closing_tag_is_put_back(hotpot_retriever, ctx_for):
    # search-r1 puts its stop string back (closes_stop): a reply that stop_when ended would
    # get a closing tag it never wrote
    llm = ScriptedLLM({"search-r1": ["<answer> x </answer>"]})
    q = Question(id="q", question="Who wrote Hamlet?", golden_answers=["Shakespeare"])
    run = Run(ctx_for(llm, hotpot_retriever), q, "search-r1")
    with pytest.raises(ValueError, match="closes_stop"):
        await run.call("search-r1", 0, question=q.question,
                       sampling={"stop_when": lambda t: True})
    assert not llm.calls  # refused before any call
