"""Each paper's turn count, on hand-built traces and on traces the workflows record."""

from __future__ import annotations

import pytest

from marag.llm.scripted import ScriptedLLM
from marag.types import Question, Step, Trace
from marag.workflows import run_method
from marag.workflows.turns import (
    jade_turns,
    mao_arag_turns,
    mask_turns,
    paper_turns,
    round_turns,
)

MSG = [{"role": "user", "content": "q"}]


def llm(role: str, rnd: int = 1, turn: int = 0, **kw) -> Step:  # type: ignore[no-untyped-def]
    return Step(role=role, round=rnd, turn=turn, messages=MSG, **kw)


def ret(rnd: int = 1, turn: int = 0) -> Step:
    return Step(role="R", round=rnd, turn=turn, raw="query")


def trace(method: str, steps: list[Step]) -> Trace:
    return Trace(id="t", question="q", method=method, steps=steps)


# A QDP plan into three parallel children, then AS: marag rounds 1, 2 (all children), 3.
PARALLEL = [
    llm("planner", 1), llm("QDP", 1),
    llm("planner", 2), llm("AG", 2),
    llm("planner", 2), ret(2), llm("AG", 2),
    llm("planner", 2), llm("AG", 2),
    llm("AS", 3),
]


def test_jade_counts_one_round_per_planner_call():
    # Algorithm 1 plans one node per round: three parallel children are three rounds
    assert jade_turns(trace("jade", PARALLEL)) == 4
    assert paper_turns(trace("jade", PARALLEL)) == 4


def test_mao_arag_counts_parallel_children_as_one_turn_and_as_its_own():
    assert mao_arag_turns(trace("mao-arag", PARALLEL)) == 3
    assert paper_turns(trace("mao-arag", PARALLEL)) == 3


def test_mask_counts_search_turns_begun():
    steps = [llm("mask.plan", 1, 0)]
    for t in (1, 2):
        steps += [llm("mask.search", t + 1, t), ret(t + 1, t), llm("mask.summary", t + 1, t),
                  llm("mask.update", t + 1, t)]
    steps += [llm("mask.search", 4, 3, parsed={"end": True}), llm("mask.answer", 4, 3)]
    assert mask_turns(trace("m-ask", steps)) == 3
    assert paper_turns(trace("m-ask", steps)) == 3
    # a plan with no search yet: no turn
    assert mask_turns(trace("m-ask", steps[:1])) == 0


@pytest.mark.parametrize("method", ["mmoa-rag", "vanilla", "llm-only"])
def test_single_pass_methods_are_one_turn(method):
    assert paper_turns(trace(method, [ret(), llm("AG")])) == 1
    assert paper_turns(trace(method, [])) == 0


def test_no_steps_no_turns_and_unknown_methods_count_rounds():
    for m in ("jade", "mao-arag", "m-ask"):
        assert paper_turns(trace(m, [])) == 0
    custom = trace("my-method", [llm("AG", 1), llm("AG", 2), llm("AG", 2)])
    assert paper_turns(custom) == round_turns(custom) == 2


ASTAIRE_Q = "Something's Gotta Give was first performed by an actor of what heritage?"
SERIAL_SCRIPT = {
    "planner": ["<workflow>QDS</workflow>", "<workflow>R, AG</workflow>",
                "<workflow>R, DS, AG</workflow>"],
    "QDS": "<q1>Who is the actor that first performed Something's Gotta Give?</q1>"
           "<q2>What is the heritage of this actor?</q2>",
    "QR": ["<query>Actor who first performed Something's Gotta Give</query>",
           "<query>Heritage of Fred Astaire</query>"],
    "AG": ["<answer>Fred Astaire</answer>", "<answer>American</answer>"],
    "DS": "<id>Document0, Document1</id>",
    "AS": "<answer>American</answer>",
}


async def test_serial_decomposition_counts_per_paper(hotpot_retriever, ctx_for):
    q = Question("s", ASTAIRE_Q, ["American"])
    jade = await run_method("jade", q, ctx_for(ScriptedLLM(SERIAL_SCRIPT), hotpot_retriever))
    mao_script = {**SERIAL_SCRIPT,
                  "planner": [*SERIAL_SCRIPT["planner"], "<workflow>AS</workflow>"]}
    mao = await run_method("mao-arag", q, ctx_for(ScriptedLLM(mao_script), hotpot_retriever))
    # JADE Case 1: root + two sub-questions; MAO-ARAG Case 4's shape: + the AS turn
    assert jade.cost.turns == 3 and jade.cost.rounds == 4
    assert mao.cost.turns == 4 and mao.cost.rounds == 4


async def test_budget_answer_adds_no_turn(hotpot_retriever, ctx_for):
    q = Question("b", ASTAIRE_Q, ["American"])
    for method, turns in (("jade", 2), ("mao-arag", 2)):
        ctx = ctx_for(ScriptedLLM(SERIAL_SCRIPT), hotpot_retriever, "method.max_rounds=2")
        t = await run_method(method, q, ctx)
        assert t.status == "budget" and t.steps[-1].role == "AS"
        assert t.cost.turns == turns


async def test_static_methods_record_one_turn(hotpot_retriever, ctx_for):
    script = ScriptedLLM({"AG": "<answer>x</answer>", "mmoa.QR": "<q1>a</q1><q2>b</q2>",
                          "DS": "<id>0</id>"})
    for method in ("llm-only", "vanilla", "mmoa-rag"):
        t = await run_method(method, Question("v", "who?"), ctx_for(script, hotpot_retriever))
        assert t.status == "ok" and t.cost.turns == 1


async def test_failed_trace_counts_what_ran(hotpot_retriever, ctx_for):
    # the scripted planner has one reply; the second planner call fails the question
    script = ScriptedLLM({"planner": ["<workflow>QDS</workflow>"],
                          "QDS": "<q1>first?</q1><q2>second?</q2>", "QR": "<query>x</query>"})
    t = await run_method("jade", Question("f", ASTAIRE_Q), ctx_for(script, hotpot_retriever))
    assert t.status == "failed"
    assert t.cost.turns == 1
