"""Adaptive-RAG: the classifier's label routes the question to no retrieval, one retrieval or
IRCoT's multi-step retrieval; an unreadable label runs the fallback and is recorded."""

from __future__ import annotations

import pytest
from tests.workflows.conftest import make_ctx

from marag.llm.scripted import ScriptedLLM
from marag.types import Question
from marag.workflows import run_method

Q = Question("q", "Were Scott Derrickson and Ed Wood of the same nationality?", ["yes"])
IRCOT = ["Scott Derrickson is an American director.",
         "Ed Wood was American too, so the answer is: yes.",
         "Both men are American. So the answer is: yes."]


@pytest.mark.parametrize(("label", "first_roles"), [
    ("A", ["adaptive.classify", "AG"]),
    ("B", ["adaptive.classify", "R", "AG"]),
    ("C", ["adaptive.classify", "R", "ircot"]),
])
async def test_the_label_picks_the_strategy(hotpot_retriever, label, first_roles):
    llm = ScriptedLLM({"adaptive.classify": f"<label>{label}</label>",
                       "AG": "<answer>yes</answer>", "ircot": list(IRCOT)})
    t = await run_method("adaptive-rag", Q, make_ctx(llm, hotpot_retriever))
    assert t.status == "ok" and t.answer == "yes"
    assert [s.role for s in t.steps][:len(first_roles)] == first_roles
    assert t.nodes[0].workflow[0] == f"classify:{label}"
    if label == "C":
        assert sum(s.role == "R" for s in t.steps) >= 2  # interleaved retrieval


async def test_an_unreadable_label_runs_the_fallback(hotpot_retriever):
    llm = ScriptedLLM({"adaptive.classify": "maybe retrieval?", "AG": "<answer>yes</answer>"})
    t = await run_method("adaptive-rag", Q, make_ctx(llm, hotpot_retriever,
                                                     "method.adaptive_fallback=B"))
    first = t.steps[0]
    assert not first.valid and first.reason == "no <label> with A, B or C"
    assert [s.role for s in t.steps] == ["adaptive.classify", "R", "AG"]
    assert any("unreadable" in n for n in t.notes)
