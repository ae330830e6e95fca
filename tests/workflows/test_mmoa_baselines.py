"""MMOA-RAG's rebuilt baselines on its pipeline: Rewrite-Retrieve-Read (no selector) and BGM
(no rewriter; the bridge selects)."""

from __future__ import annotations

import re

from tests.workflows.conftest import make_ctx

from marag.llm.scripted import ScriptedLLM
from marag.types import Question
from marag.workflows import run_method

Q = Question("q", "Were Scott Derrickson and Ed Wood of the same nationality?", ["yes"])


async def test_rrr_pools_the_rewriter_queries_and_reads_them_all(hotpot_retriever):
    llm = ScriptedLLM({"mmoa.QR": "<q1>Scott Derrickson nationality</q1><q2>Ed Wood nationality</q2>",
                       "AG": "<answer>yes</answer>"})
    t = await run_method("rrr", Q, make_ctx(llm, hotpot_retriever))
    assert t.status == "ok" and t.answer == "yes"
    assert [s.role for s in t.steps] == ["mmoa.QR", "R", "R", "AG"]
    ag = t.steps[-1]
    assert sum("Document" in m["content"] for m in ag.messages) >= 1
    assert len([r for r in t.steps if r.role == "R"]) == 2 and t.nodes[0].workflow == ["QR", "R", "AG"]


async def test_bgm_retrieves_with_the_question_and_the_bridge_selects(hotpot_retriever):
    llm = ScriptedLLM({"DS": "<id>Document1, Document3</id>", "AG": "<answer>yes</answer>"})
    t = await run_method("bgm", Q, make_ctx(llm, hotpot_retriever, "method.candidates=5"))
    assert [s.role for s in t.steps] == ["R", "DS", "AG"]
    assert t.steps[0].raw == Q.question and len(t.steps[0].doc_ids) == 5
    assert t.steps[1].parsed == [1, 3]
    shown = "".join(m["content"] for m in t.steps[2].messages)
    titles = t.steps[0].parsed["titles"]
    assert len(re.findall(r"Document\d+: ", shown)) == 2  # the bridge's two, no more
    assert f"({titles[1]})" in shown and f"({titles[3]})" in shown
