"""Parallel sub-questions and many questions overlap their LLM waits in one event loop."""

from __future__ import annotations

import asyncio

from marag.llm.scripted import ScriptedLLM
from marag.types import Question
from marag.workflows import run_method

LAT = 0.15


def _planner(messages):  # type: ignore[no-untyped-def]
    return ("<workflow>QDP</workflow>" if "Which" in messages[-1]["content"]
            else "<workflow>R, AG</workflow>")


async def test_qdp_children_run_concurrently(hotpot_retriever, ctx_for):
    llm = ScriptedLLM({
        "planner": _planner,
        "QDP": "".join(f"<q{i}>part {i} of the question?</q{i}>" for i in range(1, 5)),
        "AG": "<answer>x</answer>", "AS": "<answer>y</answer>",
    }, latency=LAT)
    q = Question("p1", "Which band formed first, Badly Drawn Boy or Wolf Alice?")
    t = await run_method("jade", q, ctx_for(llm, hotpot_retriever))
    assert t.status == "ok" and len(t.nodes) == 5
    # 11 calls: plan, QDP, then 4 x (child plan, child AG), then AS
    assert t.cost.llm_calls == 11
    # the four children's calls waited on the backend at the same time
    assert llm.max_in_flight == 4
    child_roles = [s.role for s in t.steps if s.node_id > 0]
    assert child_roles == ["planner", "R", "AG"] * 4  # merged back in child order


async def test_many_questions_share_one_event_loop(hotpot_retriever, ctx_for, qa_data):
    from marag.types import iter_jsonl

    rows = [d for _, d in iter_jsonl(qa_data / "hotpotqa.questions.jsonl")][:24]
    questions = [Question(d["id"], d["question"], d["golden_answers"]) for d in rows]
    llm = ScriptedLLM({"planner": "<workflow>R, AG</workflow>", "AG": "<answer>x</answer>"},
                      latency=LAT)
    ctx = ctx_for(llm, hotpot_retriever)
    traces = await asyncio.gather(*(run_method("jade", q, ctx) for q in questions))
    assert all(t.status == "ok" for t in traces)
    assert [t.id for t in traces] == [q.id for q in questions]
    # every question's planner call was waiting on the backend at once
    assert llm.max_in_flight == len(questions)
    for t, q in zip(traces, questions):
        assert t.steps[1].raw == q.question and t.golden_answers == q.golden_answers
