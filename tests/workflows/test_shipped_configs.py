"""Every shipped config drives its method through the engine: each configured backend name is
stood in for by a scripted backend, and each receives only the roles the config maps to it."""

from __future__ import annotations

from pathlib import Path

import pytest

from marag.config import load_config
from marag.llm.scripted import ScriptedLLM
from marag.types import Question
from marag.workflows import Context, run_method

CONFIGS = sorted((Path(__file__).resolve().parents[2] / "configs").glob("*.yaml"))


def _self_rag(messages: list[dict[str, str]]) -> str:
    """A Self-RAG checkpoint: asks for retrieval, then answers from each passage."""
    last = messages[-1]
    if last["role"] == "user":
        return "[Retrieval]"
    if last["content"] == "[No Retrieval]":
        return "yes[Utility:4]"
    return "[Relevant]yes[Fully supported][Utility:5]"


REPLIES = {
    "adaptive.classify": "<label>B</label>",
    "planner": "<workflow>QR, R, DS, AG</workflow>", "QR": "<query>nationality</query>",
    "QDS": "<q1>a?</q1>", "QDP": "<q1>a?</q1>", "DS": "<id>0</id>",
    "AG": "<answer>yes</answer>", "AS": "<answer>yes</answer>", "mmoa.QR": "<q1>a?</q1>",
    "mask.plan": "<q1>a?</q1><a1>unknown</a1><predicted_answer>unknown</predicted_answer>",
    "mask.search": ["<search>Scott Derrickson</search>", "<end>"],
    "mask.summary": "<evidence>American</evidence>", "mask.update": "<Update>t1</Update>",
    "mask.answer": "<predicted_answer>yes</predicted_answer>",
    "search-r1": ["<think>look</think><search>Scott Derrickson</search>",
                  "<think>both American</think><answer>yes</answer>"],
    "search-o1": ["Look it up.\n<|begin_search_query|>Scott Derrickson<|end_search_query|>",
                  "Both are American, so \\boxed{yes}."],
    "search-o1.rid": "**Final Information**\n\nScott Derrickson is an American director.",
    "ircot": ["Scott Derrickson is an American director.",
              "Ed Wood was American too, so the answer is: yes.",
              "Both men are American. So the answer is: yes."],
    "deepnote.init": "<note>Scott Derrickson is an American director.</note>",
    "deepnote.query": "<query>Ed Wood nationality</query>",
    "deepnote.update": "<note>Scott Derrickson and Ed Wood were both American.</note>",
    "deepnote.compare": "<better>no</better>",
    "deepnote.answer": "<answer>yes</answer>",
    "self-rag": _self_rag,
}


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.stem)
async def test_shipped_config_runs_its_method(path, hotpot_retriever):
    cfg = load_config(path)
    llms = {name: ScriptedLLM(dict(REPLIES)) for name in cfg.llms}
    ctx = Context(llms=llms, config=cfg, retriever=hotpot_retriever)
    q = Question("cfg", "Were Scott Derrickson and Ed Wood of the same nationality?", ["yes"])
    t = await run_method(cfg.method.name, q, ctx)
    assert t.status == "ok", t.error
    assert t.answer == "yes" and t.metrics["em"] == 1.0
    assert all(s.valid for s in t.steps), [(s.role, s.reason) for s in t.steps if not s.valid]
    for name, llm in llms.items():
        for role, _ in llm.calls:
            assert cfg.backend_for(role) == name
    assert sum(len(llm.calls) for llm in llms.values()) == t.cost.llm_calls > 0
