"""method.root_plan / method.sub_plan: plans fixed in advance run without a planner call (the
scripted LLM has no planner rule, so a planner call would fail the run), in jade and in
mao-arag (whose AS turn would otherwise ask the planner), serial and parallel, fall back like a
planned decomposition, and a plan that could not run is refused when the config loads."""

from __future__ import annotations

import re

import pytest

from marag.config import ConfigError, load_config
from marag.llm.scripted import ScriptedLLM
from marag.types import Question
from marag.workflows import run_method

Q = Question("b1", "Which magazine was started first, Arthur's Magazine or First for Women?",
             ["Arthur's Magazine"])
PARTS = ["When was Arthur's Magazine started?", "When was First for Women started?"]


def _team(decomposer: str, **rules: object) -> ScriptedLLM:
    """A scripted team that splits Q into PARTS with ``decomposer``, answers each part and
    the whole; ``rules`` adds (or replaces) roles' replies."""
    return ScriptedLLM({
        decomposer: "".join(f"<q{i}>{q}</q{i}>" for i, q in enumerate(PARTS, 1)),
        "AG": ["<answer>1844</answer>", "<answer>1989</answer>"],
        "AS": "<answer>Arthur's Magazine</answer>",
        **rules,
    })


async def test_a_fixed_serial_decomposition_with_fixed_sub_plans_asks_no_planner(
        hotpot_retriever, ctx_for):
    llm = _team("QDS", QR=[f"<query>{q} (rewritten)</query>" for q in PARTS])
    t = await run_method("jade", Q, ctx_for(llm, hotpot_retriever, "method.root_plan=[QDS]",
                                            "method.sub_plan=[R, AG]"))
    assert t.status == "ok" and t.answer == "Arthur's Magazine"
    assert not [s for s in t.steps if s.role == "planner"]
    assert [n.workflow for n in t.nodes] == [["QDS"], ["R", "AG"], ["R", "AG"]]
    assert [n.kind for n in t.nodes[1:]] == ["serial", "serial"]
    # each part is searched with its own rewritten question
    assert [n.question for n in t.nodes[1:]] == [f"{q} (rewritten)" for q in PARTS]
    assert [s.raw for s in t.steps if s.role == "R"] == [f"{q} (rewritten)" for q in PARTS]


async def test_a_fixed_root_plan_alone_leaves_the_sub_questions_to_the_planner(
        hotpot_retriever, ctx_for):
    llm = _team("QDP", planner="<workflow>AG</workflow>")
    t = await run_method("jade", Q, ctx_for(llm, hotpot_retriever, "method.root_plan=[QDP]"))
    assert t.status == "ok" and t.nodes[0].workflow == ["QDP"]
    assert [s.node_id for s in t.steps if s.role == "planner"] == [1, 2]
    # a solving root plan runs as it is, with no call at all before it
    llm = ScriptedLLM({"AG": "<answer>Arthur's Magazine</answer>"})
    t = await run_method("jade", Q, ctx_for(llm, hotpot_retriever, "method.root_plan=[R, AG]"))
    assert t.status == "ok" and [s.role for s in t.steps] == ["R", "AG"]


async def test_a_fixed_decomposition_without_sub_questions_falls_back(hotpot_retriever, ctx_for):
    llm = ScriptedLLM({"QDS": "I cannot split this.", "AG": "<answer>Arthur's Magazine</answer>"})
    t = await run_method("jade", Q, ctx_for(llm, hotpot_retriever, "method.root_plan=[QDS]"))
    assert t.status == "ok" and t.nodes[0].workflow == ["R", "AG"] and len(t.nodes) == 1
    assert any("QDS gave no sub-questions; fallback R,AG" in n for n in t.notes)


def test_a_fixed_plan_that_cannot_run_is_refused_when_the_config_loads():
    for overrides, said in [
        (("method.root_plan=[AG, R]",), "method.root_plan ['AG', 'R']: codes out of order"),
        (("method.root_plan=[QDS]", "method.max_depth=0"), "not allowed at this depth"),
        (("method.root_plan=[QDS, AG]",), "must be the only code"),
        (("method.sub_plan=[AG, R]",), "method.sub_plan"),
        (("method.name=vanilla", "method.sub_plan=[R, AG]"),
         "method.sub_plan is read by the planner methods"),
    ]:
        with pytest.raises(ConfigError, match=re.escape(said)):
            load_config(None, list(overrides))


async def test_parallel_parts_take_the_fixed_sub_plan(hotpot_retriever, ctx_for):
    llm = _team("QDP")
    t = await run_method("jade", Q, ctx_for(llm, hotpot_retriever, "method.root_plan=[QDP]",
                                            "method.sub_plan=[R, AG]"))
    assert t.status == "ok" and t.answer == "Arthur's Magazine"
    assert [n.workflow for n in t.nodes] == [["QDP"], ["R", "AG"], ["R", "AG"]]
    assert [n.kind for n in t.nodes[1:]] == ["parallel", "parallel"]
    # no rewrite for parallel parts: each is searched with its own question
    assert [s.raw for s in t.steps if s.role == "R"] == PARTS
    assert [s.role for s in t.steps].count("QR") == 0


async def test_mao_arag_asks_no_planner_at_a_fixed_roots_summary(hotpot_retriever, ctx_for):
    llm = _team("QDS", QR="<query>When was First for Women started?</query>")
    t = await run_method("mao-arag", Q, ctx_for(llm, hotpot_retriever, "method.name=mao-arag",
                                                "method.root_plan=[QDS]",
                                                "method.sub_plan=[R, AG]"))
    assert t.status == "ok" and t.answer == "Arthur's Magazine"
    assert not [s for s in t.steps if s.role == "planner"]
    # mao-arag rewrites only the serial parts after the first
    assert [s.node_id for s in t.steps if s.role == "QR"] == [2]
