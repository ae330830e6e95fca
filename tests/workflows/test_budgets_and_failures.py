"""Budgets end runs with a recorded best answer; backend and retrieval failures become failed
traces that keep the steps recorded so far."""

from __future__ import annotations

from marag.llm.scripted import ScriptedLLM
from marag.types import Question
from marag.workflows import run_method
from marag.workflows.planner import is_solving, next_ready

Q = Question("b1", "Which magazine was started first, Arthur's Magazine or First for Women?",
             ["Arthur's Magazine"])


async def test_always_decompose_planner_terminates_at_max_depth(hotpot_retriever, ctx_for):
    llm = ScriptedLLM({
        "planner": "<workflow>QDP</workflow>",
        "QDP": "<q1>When was Arthur's Magazine started?</q1><q2>When was First for Women "
               "started?</q2>",
        "AG": ["<answer>1844</answer>", "<answer>1989</answer>"],
        "AS": "<answer>Arthur's Magazine</answer>",
    })
    t = await run_method("jade", Q, ctx_for(llm, hotpot_retriever))
    assert t.status == "ok" and t.answer == "Arthur's Magazine"
    child_plans = [s for s in t.steps if s.role == "planner" and s.node_id > 0]
    assert len(child_plans) == 2
    assert all(not s.valid and "not allowed" in s.reason for s in child_plans)
    # the fallback (R, AG) solved each child
    assert [n.workflow for n in t.nodes[1:]] == [["R", "AG"], ["R", "AG"]]
    assert sum(1 for n in t.notes if "fallback R,AG" in n) == 2
    assert t.metrics["em"] == 1.0 and t.metrics["acc"] == 1.0


async def test_deep_decomposition_stops_at_max_rounds(hotpot_retriever, ctx_for):
    llm = ScriptedLLM({
        "planner": "<workflow>QDS</workflow>",
        "QDS": "<q1>first part?</q1><q2>second part?</q2>",
        "QR": "<query>first part, rewritten</query>",
        "AG": "<answer>a guess</answer>",
    })
    ctx = ctx_for(llm, hotpot_retriever, "method.max_depth=10", "method.max_rounds=3")
    t = await run_method("jade", Q, ctx)
    assert t.status == "budget" and t.cost.rounds == 3
    assert t.answer == "a guess"
    assert [s.role for s in t.steps] == ["planner", "QDS"] + ["QR", "planner", "QDS"] * 2 + ["AG"]
    assert t.steps[-1].node_id == 0 and t.steps[-1].messages  # AG on the root question
    assert any("max_rounds (3) reached" in n and "AG without documents" in n for n in t.notes)
    assert [n.depth for n in t.nodes] == [0, 1, 1, 2, 2, 3, 3]
    assert [n.question for n in t.nodes[1:]] == ["first part, rewritten", "second part?"] * 2 + [
        "first part?", "second part?"]


async def test_budget_answer_summarises_solved_sub_questions(hotpot_retriever, ctx_for):
    llm = ScriptedLLM({
        "planner": ["<workflow>QDS</workflow>", "<workflow>R, AG</workflow>"],
        "QDS": "<q1>When was Arthur's Magazine started?</q1><q2>When was First for Women "
               "started?</q2><q3>Which is earlier?</q3>",
        "QR": "no tags here",
        "AG": "<answer>1844</answer>",
        "AS": "<answer>Arthur's Magazine</answer>",
    })
    ctx = ctx_for(llm, hotpot_retriever, "method.max_rounds=2")
    t = await run_method("jade", Q, ctx)
    assert t.status == "budget" and t.answer == "Arthur's Magazine"
    assert [s.role for s in t.steps] == ["planner", "QDS", "QR", "planner", "R", "AG", "AS"]
    assert not t.steps[2].valid  # an invalid rewrite leaves the sub-question as it was
    as_prompt = t.steps[-1].messages[-1]["content"]
    assert "When was Arthur's Magazine started?" in as_prompt and "1844" in as_prompt
    assert "First for Women started" not in as_prompt  # unsolved sub-questions are left out
    assert any("AS from 1 solved" in n for n in t.notes)


async def test_too_many_sub_questions_are_cut_to_max_subquestions(hotpot_retriever, ctx_for):
    subs = "".join(f"<q{i}>part {i}?</q{i}>" for i in range(1, 7))
    llm = ScriptedLLM({"planner": ["<workflow>QDP</workflow>"] + ["<workflow>AG</workflow>"] * 3,
                       "QDP": subs, "AG": "<answer>x</answer>", "AS": "<answer>y</answer>"})
    t = await run_method("jade", Q, ctx_for(llm, hotpot_retriever, "method.max_subquestions=3"))
    assert t.status == "ok" and len(t.nodes) == 4
    qdp = t.steps[1]
    assert not qdp.valid and qdp.reason and len(qdp.parsed) == 3


async def test_backend_error_fails_the_question_and_keeps_steps(hotpot_retriever, ctx_for):
    llm = ScriptedLLM({"planner": "<workflow>R, DS, AG</workflow>", "DS": "<id>0</id>"})
    t = await run_method("jade", Q, ctx_for(llm, hotpot_retriever))
    assert t.status == "failed" and t.answer is None
    assert t.error.startswith("LLMError") and "no rule for role 'AG'" in t.error
    assert [s.role for s in t.steps] == ["planner", "R", "DS"]
    assert t.cost.llm_calls == 2 and t.cost.retrieval_calls == 1 and t.cost.seconds > 0


async def test_missing_retriever_fails_with_a_clear_error(ctx_for):
    llm = ScriptedLLM({"AG": "<answer>x</answer>"})
    t = await run_method("vanilla", Q, ctx_for(llm, None))
    assert t.status == "failed" and "no retriever is configured" in t.error
    # llm-only needs none
    t2 = await run_method("llm-only", Q, ctx_for(llm, None))
    assert t2.status == "ok" and t2.answer == "x"


async def test_bad_fallback_and_unknown_backend_are_config_failures(hotpot_retriever, ctx_for):
    llm = ScriptedLLM({"planner": "nonsense"})
    t = await run_method("jade", Q, ctx_for(llm, hotpot_retriever, "method.fallback=[R]"))
    assert t.status == "failed" and "method.fallback" in t.error
    ctx = ctx_for(llm, hotpot_retriever, "roles.planner=policy", "llms.policy.backend=scripted")
    t = await run_method("jade", Q, ctx)
    assert t.status == "failed" and "no backend of that name" in t.error


async def test_unknown_method_is_a_caller_error(ctx_for):
    import pytest

    with pytest.raises(ValueError, match="unknown method 'rag-xyz'"):
        await run_method("rag-xyz", Q, ctx_for(ScriptedLLM(), None))


def test_is_solving_rules():
    assert is_solving(["AG"]) and is_solving(["QR", "R", "DS", "AG"]) and is_solving(["R", "AG"])
    assert not is_solving(["DS", "AG"]) and not is_solving(["R", "QR", "AG"])
    assert not is_solving(["R"]) and not is_solving([]) and not is_solving(["QDS"])
    assert not is_solving(["AG", "AG"])


def test_next_ready_waits_for_serial_siblings_and_batches_parallel_ones():
    from marag.types import Node

    nodes = [Node(0, "root", children=[1, 2, 3]),
             Node(1, "a", parent=0, kind="serial", depth=1),
             Node(2, "b", parent=0, kind="serial", depth=1),
             Node(3, "c", parent=0, kind="serial", depth=1)]
    assert [n.id for n in next_ready(nodes)] == [1]
    nodes[1].solved = True
    assert [n.id for n in next_ready(nodes)] == [2]
    par = [Node(0, "root", children=[1, 2]),
           Node(1, "a", parent=0, kind="parallel", depth=1),
           Node(2, "b", parent=0, kind="parallel", depth=1)]
    assert [n.id for n in next_ready(par)] == [1, 2]
    par[1].solved = par[2].solved = True
    assert [n.id for n in next_ready(par)] == [0]


async def test_skipped_codes_never_run(hotpot_retriever, ctx_for):
    llm = ScriptedLLM({
        "planner": "<workflow>R, DS, AG</workflow>",
        "DS": "<id>0</id>",
        "AG": "<answer>Arthur's Magazine</answer>",
    })
    t = await run_method("jade", Q, ctx_for(llm, hotpot_retriever, "method.skip_codes=[DS]"))
    roles = [s.role for s in t.steps]
    assert roles == ["planner", "R", "AG"] and t.nodes[0].workflow == ["R", "DS", "AG"]
    assert any("DS skipped (method.skip_codes)" in n for n in t.notes)
    with_ds = await run_method("jade", Q, ctx_for(llm, hotpot_retriever))
    assert [s.role for s in with_ds.steps] == ["planner", "R", "DS", "AG"]
