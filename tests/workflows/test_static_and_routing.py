"""llm-only, vanilla and mmoa-rag pipelines, and role -> backend routing."""

from __future__ import annotations

import pytest

from marag.llm.scripted import ScriptedLLM
from marag.roles import get_role
from marag.types import Passage, Question
from marag.workflows import run_method
from marag.workflows.static import pool_candidates, split_candidates

HQ = Question("s1", "Were Scott Derrickson and Ed Wood of the same nationality?", ["yes"])


def test_split_candidates_matches_the_paper_table():
    assert [split_candidates(10, n) for n in (1, 2, 3, 4)] == [
        [10], [5, 5], [4, 3, 3], [3, 3, 2, 2]]
    assert split_candidates(2, 4) == [1, 1, 0, 0] and split_candidates(5, 0) == []


def test_pool_candidates_replaces_duplicates_from_the_same_list():
    p = [Passage(str(i), f"t{i}", "x") for i in range(8)]
    pooled = pool_candidates([[p[0], p[1], p[2]], [p[1], p[0], p[3], p[4]]], [2, 2])
    assert [x.id for x in pooled] == ["0", "1", "3", "4"]


async def test_llm_only_and_vanilla(hotpot_retriever, ctx_for):
    llm = ScriptedLLM({"AG": "<answer>yes</answer>"})
    t = await run_method("llm-only", HQ, ctx_for(llm, hotpot_retriever))
    assert t.answer == "yes" and [s.role for s in t.steps] == ["AG"]
    assert t.steps[0].messages == get_role("AG").build(question=HQ.question, docs=None)
    t = await run_method("vanilla", HQ, ctx_for(llm, hotpot_retriever, "method.top_k=3"))
    assert [s.role for s in t.steps] == ["R", "AG"] and t.status == "ok"
    r = t.steps[0]
    assert r.raw == HQ.question and len(r.doc_ids) == 3
    # the real index finds the gold paragraphs for this HotpotQA question
    assert {"Scott Derrickson", "Ed Wood"} & set(r.parsed["titles"])
    assert all(title in t.steps[1].messages[-1]["content"] for title in r.parsed["titles"])
    assert t.cost.rounds == 1 and t.nodes[0].workflow == ["R", "AG"]


async def test_mmoa_rag_pools_ten_candidates_and_selects(hotpot_retriever, ctx_for):
    llm = ScriptedLLM({
        "mmoa.QR": "<q1>What is the nationality of Scott Derrickson?</q1>"
                   "<q2>What is the nationality of Ed Wood?</q2>"
                   "<q3>Scott Derrickson and Ed Wood nationality</q3>",
        "DS": "<id>0, 4</id>",
        "AG": "<answer>yes</answer>",
    })
    t = await run_method("mmoa-rag", HQ, ctx_for(llm, hotpot_retriever))
    assert t.status == "ok" and t.answer == "yes"
    assert [s.role for s in t.steps] == ["mmoa.QR", "R", "R", "R", "DS", "AG"]
    ds = t.steps[4]
    prompt = ds.messages[-1]["content"]
    assert "Document9" in prompt and "Document10" not in prompt  # exactly K = 10 candidates
    r1, r2, r3 = t.steps[1:4]
    assert all(len(r.doc_ids) == 10 for r in (r1, r2, r3))  # each query fetched the full pool
    hits = hotpot_retriever.search_batch([r1.raw, r2.raw, r3.raw], 10)
    pooled = pool_candidates([h.passages for h in hits], [4, 3, 3])
    assert len({p.id for p in pooled}) == 10
    assert ds.messages == get_role("DS").build(question=HQ.question, docs=pooled)
    # AG sees exactly the two selected candidates
    assert t.steps[5].messages == get_role("AG").build(question=HQ.question,
                                                       docs=[pooled[0], pooled[4]])


async def test_mmoa_invalid_selection_keeps_all_and_no_subquestions_uses_question(
        hotpot_retriever, ctx_for):
    llm = ScriptedLLM({"mmoa.QR": "I cannot split this.", "DS": "<id>0, 0, 42</id>",
                       "AG": "<answer>yes</answer>"})
    t = await run_method("mmoa-rag", HQ, ctx_for(llm, hotpot_retriever, "method.candidates=6"))
    assert t.status == "ok"
    qr, r, ds = t.steps[0], t.steps[1], t.steps[2]
    assert not qr.valid and r.raw == HQ.question and len(r.doc_ids) == 6
    assert not ds.valid and ds.reason
    assert all(ti in t.steps[3].messages[-1]["content"] for ti in r.parsed["titles"])


async def test_constrained_selector_passes_allowed_ids(hotpot_retriever, ctx_for):
    seen = []

    class Recording(ScriptedLLM):
        async def generate(self, batch, params):  # type: ignore[no-untyped-def]
            seen.append(params)
            return await super().generate(batch, params)

    llm = Recording({"mmoa.QR": "<q1>Scott Derrickson</q1>", "DS": "<id>1</id>",
                     "AG": "<answer>yes</answer>"})
    ctx = ctx_for(llm, hotpot_retriever, "method.constrained_selector=true",
                  "method.candidates=4")
    t = await run_method("mmoa-rag", HQ, ctx)
    assert t.status == "ok"
    n = min(4, len({d for st in t.steps if st.role == "R" for d in st.doc_ids}))
    assert n >= 2
    ids = tuple(str(i) for i in range(n))
    assert seen[1].allowed_text[-2 * n:] == ids + tuple(" " + i for i in ids)
    assert "<id>" in seen[1].allowed_text and "</id>" in seen[1].allowed_text
    assert seen[0].allowed_text == () and seen[2].allowed_text == ()


async def test_roles_run_on_their_mapped_backends(hotpot_retriever, ctx_for):
    policy = ScriptedLLM({"planner": ["<workflow>QDP</workflow>",
                                      "<workflow>QR, R, DS, AG</workflow>",
                                      "<workflow>AG</workflow>"]}, model="pol")
    executor = ScriptedLLM({
        "QDP": "<q1>Nationality of Scott Derrickson?</q1><q2>Nationality of Ed Wood?</q2>",
        "QR": "<query>Scott Derrickson nationality</query>", "DS": "<id>0</id>",
        "AG": "<answer>American</answer>", "AS": "<answer>yes</answer>"}, model="exe")
    ctx = ctx_for({"policy": policy, "executor": executor}, hotpot_retriever,
                  "roles.planner=policy", "roles.default=executor",
                  "prices.exe.prompt_per_million=1000000")
    t = await run_method("jade", HQ, ctx)
    assert t.status == "ok" and t.answer == "yes"
    assert {r for r, _ in policy.calls} == {"planner"} and len(policy.calls) == 3
    assert "planner" not in {r for r, _ in executor.calls} and len(executor.calls) == 6
    for s in t.steps:
        if s.role == "planner":
            assert (s.backend, s.model) == ("policy", "pol")
        elif s.role != "R":
            assert (s.backend, s.model) == ("executor", "exe")
    # one dollar per prompt token of the priced executor model, none for the planner's
    exe_prompt = sum(s.prompt_tokens for s in t.steps if s.model == "exe")
    assert t.cost.money == pytest.approx(exe_prompt)


async def test_money_uses_list_prices_for_api_models(ctx_for):
    llm = ScriptedLLM({"AG": "<answer>yes</answer>"}, model="gpt-4o-mini-2024-07-18")
    t = await run_method("llm-only", HQ, ctx_for(llm, None))
    s = t.steps[0]
    assert s.prompt_tokens > 0 and s.completion_tokens > 0
    assert t.cost.money == pytest.approx((0.15 * s.prompt_tokens + 0.60 * s.completion_tokens) / 1e6)
