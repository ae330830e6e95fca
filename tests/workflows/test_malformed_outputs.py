"""Arbitrary and malformed completions for every role, through whole workflows: nothing
escapes, every broken step is recorded invalid with a reason, and every run ends ok or budget."""

from __future__ import annotations

import asyncio

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from marag.llm.scripted import ScriptedLLM
from marag.roles import ROLES
from marag.types import Question, Trace
from marag.workflows import METHODS, run_method
from marag.workflows.planner import is_solving

FRAGMENTS = [
    "<workflow>", "</workflow>", "QDS", "QDP", "QR", "R", "DS", "AG", "AS", ", ", "X",
    "<q1>", "</q1>", "<q2>", "</q2>", "<q5>", "<a1>", "</a1>", "unknown", "<answer>",
    "</answer>", "<query>", "</query>", "<id>", "</id>", "Document0", "Document7", "0", "3",
    "-1", "99", "<search>", "</search>", "<end>", "<evidence>", "</evidence>",
    "No useful information", "<Update>", "</Update>", "<Add>", "</Add>", "t1", "t4", "t0",
    "<predicted_answer>", "</predicted_answer>", " ", "\n", "Paris", "é漢", "{", "}",
]
completions = st.one_of(
    st.text(max_size=60),
    st.lists(st.sampled_from(FRAGMENTS), max_size=14).map("".join),
)
QUESTION = Question("h1", "Were Scott Derrickson and Ed Wood of the same nationality?", ["yes"])


def _check(trace: Trace, max_rounds: int) -> None:
    assert trace.status in ("ok", "budget"), trace.error
    assert isinstance(trace.answer, str)
    llm_steps = [s for s in trace.steps if s.role != "R"]
    assert trace.cost.llm_calls == len(llm_steps)
    assert trace.cost.retrieval_calls == len(trace.steps) - len(llm_steps)
    for s in llm_steps:
        assert s.role in ROLES and s.messages
        if not s.valid:
            assert s.reason, f"{s.role} step invalid without a reason: {s.raw!r}"
        # the contracts the workflows rely on when a step says it is valid
        if s.role in ("AG", "AS") and s.valid:
            assert isinstance(s.parsed, str)
        if s.role == "planner" and s.valid:
            assert s.parsed in (["QDS"], ["QDP"]) or is_solving(s.parsed)
        if s.role in ("QDS", "QDP") and s.valid:
            assert 1 <= len(s.parsed) <= 4
        if s.role == "DS" and s.valid:
            assert s.parsed and len(set(s.parsed)) == len(s.parsed)
    if trace.method in ("jade", "mao-arag"):
        assert trace.cost.rounds <= max_rounds
        assert all(n.solved and isinstance(n.answer, str) for n in trace.nodes if n.id == 0)
        for n in trace.nodes:
            if n.workflow and n.workflow[0] not in ("QDS", "QDP"):
                assert is_solving(n.workflow)
    if trace.method == "m-ask":
        assert len([s for s in trace.steps if s.role == "mask.search"]) <= 3


def _run(method: str, data: st.DataObject, retriever, ctx_for, *overrides: str) -> Trace:  # type: ignore[no-untyped-def]
    def draw(messages):  # type: ignore[no-untyped-def]
        return data.draw(completions)

    llm = ScriptedLLM({name: draw for name in ROLES})
    ctx = ctx_for(llm, retriever, *overrides)
    return asyncio.run(run_method(method, QUESTION, ctx))


SETTINGS = settings(max_examples=40, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture])


@SETTINGS
@given(data=st.data(), method=st.sampled_from(sorted(METHODS)))
def test_arbitrary_completions_never_break_a_method(data, method, hotpot_retriever, ctx_for):
    trace = _run(method, data, hotpot_retriever, ctx_for)
    _check(trace, 8)


@SETTINGS
@given(data=st.data())
def test_arbitrary_plans_with_deep_decomposition_stay_in_budget(data, hotpot_retriever, ctx_for):
    trace = _run("jade", data, hotpot_retriever, ctx_for, "method.max_depth=3",
                 "method.max_rounds=4")
    _check(trace, 4)
    if trace.status == "budget":
        assert any(n.startswith("budget:") for n in trace.notes)


def test_untagged_text_is_invalid_for_every_role(hotpot_retriever, ctx_for):
    """Plain prose where tags are expected: every LLM step is recorded invalid with a reason."""
    for method in sorted(METHODS):
        llm = ScriptedLLM({name: "I am not sure what you mean." for name in ROLES})
        # self-rag's decision and its answer without retrieval are prose by design: with
        # retrieval forced, every continuation must open with a relevance token
        extra = ["method.self_rag_mode=always"] if method == "self-rag" else []
        t = asyncio.run(run_method(method, QUESTION, ctx_for(llm, hotpot_retriever, *extra)))
        assert t.status == "ok", (method, t.error)
        llm_steps = [s for s in t.steps if s.role != "R"]
        if method == "ircot":  # its chain is prose by design: only the reader (last) has a format
            llm_steps = llm_steps[-1:]
        assert llm_steps and all(not s.valid and s.reason for s in llm_steps), (
            method, [(s.role, s.valid) for s in llm_steps])
