"""Self-RAG at inference: the retrieval decision (by the [Retrieval] token's probability over a
threshold, by the token written, or fixed), one continuation per passage scored by its
reflection tokens, the best one's text as the answer; behind the openai backend against a
scripted OpenAI-compatible server that speaks the checkpoints' tokens with their
probabilities (top_logprobs), and on the scripted LLM (no probabilities: the tokens written)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
from tests.workflows.conftest import make_ctx, scripted_chat_app

from marag.config import load_config
from marag.llm.factory import make_llms
from marag.llm.scripted import ScriptedLLM
from marag.retrieval.base import Retriever
from marag.roles.self_rag import prompt
from marag.types import Hits, Passage, Question
from marag.workflows import Context, run_method

CONFIG = Path(__file__).resolve().parents[2] / "configs" / "self-rag.yaml"
Q = Question(id="q1", question="Which magazine was started first, Arthur's Magazine or First "
             "for Women?", golden_answers=["Arthur's Magazine"])
PASSAGES = [
    Passage("d1", "First for Women", "First for Women is a woman's magazine started in 1989."),
    Passage("d2", "Arthur's Magazine", "Arthur's Magazine (1844-1846) was an American literary "
            "periodical."),
    Passage("d3", "Radio City", "Radio City is India's first private FM radio station."),
]
# what the checkpoint writes after each passage (by title), and how sure it is of each token
CONTINUATIONS = {
    "First for Women": ("[Relevant]First for Women[Fully supported][Utility:5]",
                        {"[Relevant]": 0.55, "[Irrelevant]": 0.45},
                        {"[Fully supported]": 0.4, "[Partially supported]": 0.4,
                         "[No support / Contradictory]": 0.2},
                        {"[Utility:5]": 0.5, "[Utility:4]": 0.5}),
    "Arthur's Magazine": ("[Relevant]Arthur's Magazine[Fully supported][Utility:5]</s>",
                          {"[Relevant]": 0.95, "[Irrelevant]": 0.05},
                          {"[Fully supported]": 0.9, "[Partially supported]": 0.1},
                          {"[Utility:5]": 0.9, "[Utility:4]": 0.1}),
    "Radio City": ("[Irrelevant]Radio City[No support / Contradictory][Utility:1]",
                   {"[Irrelevant]": 0.9, "[Relevant]": 0.1},
                   {"[No support / Contradictory]": 0.9, "[Fully supported]": 0.1},
                   {"[Utility:1]": 0.8, "[Utility:2]": 0.2}),
}


class Fixed(Retriever):
    """The same passages for every query, recording each k."""

    name = "fixed"

    def __init__(self) -> None:
        self.ks: list[int] = []

    def search_batch(self, queries: list[str], k: int) -> list[Hits]:
        self.ks.append(k)
        return [Hits(q, PASSAGES[:k], [1.0] * min(k, len(PASSAGES))) for q in queries]


def _entry(token: str, dist: dict[str, float]) -> dict[str, Any]:
    return {"token": token, "logprob": math.log(dist.get(token, 0.5)),
            "top_logprobs": [{"token": t, "logprob": math.log(p)} for t, p in dist.items()]}


def _tokens(text: str, rel: dict, sup: dict, use: dict) -> list[dict[str, Any]]:
    """The continuation as tokens (a reflection token is one token; words one each), each
    reflection token with the given alternatives."""
    import re

    out = []
    for piece in re.findall(r"\[[^\]]+\]|</s>|[^\[<]+", text):
        dist = rel if piece in rel else sup if piece in sup else use if piece in use else None
        out.append(_entry(piece, dist) if dist else
                   {"token": piece, "logprob": math.log(0.8),
                    "top_logprobs": [{"token": piece, "logprob": math.log(0.8)}]})
    return out


def checkpoint(p_retrieval: float):
    """A scripted Self-RAG checkpoint behind an OpenAI-compatible chat route."""
    def reply(body: dict[str, Any]) -> Any:
        messages = body["messages"]
        if len(messages) == 1:  # the decision: the first token only
            dist = {"[Retrieval]": p_retrieval, "[No Retrieval]": 1 - p_retrieval}
            token = max(dist, key=dist.get)
            return token, [_entry(token, dist)]
        last = messages[-1]["content"]
        if last == "[No Retrieval]":
            text = "Arthur's Magazine was started in 1844.[Utility:5]"
            return text, _tokens(text, {}, {}, {"[Utility:5]": 1.0})
        title = last.removeprefix("[Retrieval]<paragraph>").split("\n")[0]
        text, rel, sup, use = CONTINUATIONS[title]
        return text, _tokens(text, rel, sup, use)
    return reply


async def _behind_openai(serve_app, reply, *overrides: str):
    app, seen = scripted_chat_app(reply)
    retriever = Fixed()
    with serve_app(app) as url:
        config = load_config(CONFIG, [f"llms.default.base_url={url}/v1", *overrides])
        llms = make_llms(config)
        ctx = Context(llms=llms, config=config, retriever=retriever)
        try:
            trace = await run_method("self-rag", Q, ctx)
        finally:
            await ctx.aclose()
    return trace, seen, retriever


async def test_protocol_over_openai_backend(serve_app):
    trace, seen, retriever = await _behind_openai(serve_app, checkpoint(0.3))
    assert trace.status == "ok", trace.error
    # two passages both write [Relevant]..[Fully supported][Utility:5]; their probabilities
    # make Arthur's Magazine's continuation the best
    assert trace.answer == "Arthur's Magazine" and trace.metrics["em"] == 1.0
    decide, _search, *cont = trace.steps
    assert [s.role for s in trace.steps] == ["self-rag", "R"] + ["self-rag"] * 3
    # P([Retrieval]) 0.3 over [Retrieval] + [No Retrieval] is above the 0.2 threshold:
    # retrieve, though [No Retrieval] was the token written
    assert decide.raw == "[No Retrieval]" and decide.parsed["retrieve"] is True
    how = decide.parsed["decision"]
    assert how["from"] == "logprobs" and how["threshold"] == 0.2
    assert how["p_retrieval"] == pytest.approx(0.3)
    assert retriever.ks == [10]  # the preset's top-10 (the fixture has 3 passages)
    # what went over the wire: the checkpoints' prompt text, one passage each, continued;
    # token alternatives asked for, special tokens kept in the text
    first = seen[0]
    assert first["messages"] == [{"role": "user", "content": prompt(Q.question)}]
    assert first["max_tokens"] == 1 and first["top_logprobs"] == 20 and first["logprobs"]
    assert first["skip_special_tokens"] is False
    for body, p in zip(seen[1:], PASSAGES):
        assert body["messages"][-1] == {"role": "assistant", "content":
                                        f"[Retrieval]<paragraph>{p.title}\n{p.text}</paragraph>"}
        assert body["continue_final_message"] is True and body["max_tokens"] == 100
    scores = [s.parsed["critique"] for s in cont]
    assert all(c["from"] == "logprobs" for c in scores)
    assert scores[1]["score"] > scores[0]["score"] > scores[2]["score"]
    assert scores[1]["relevance"] == pytest.approx(0.95)
    assert scores[1]["support"] == pytest.approx(0.9 + 0.5 * 0.1)
    # the alternatives were read and dropped from the record; the sampled logprobs stay
    assert all(s.top_logprobs is None for s in trace.steps)
    assert cont[0].logprobs and len(cont[0].logprobs) == 4
    assert [s.turn for s in trace.steps] == [0, 0, 1, 2, 3]
    assert "self-rag: passage 2 of 3 scored best" in trace.notes[-1]
    assert not any("no token probabilities" in n for n in trace.notes)


async def test_below_the_threshold_the_model_answers_without_retrieval(serve_app):
    trace, seen, retriever = await _behind_openai(serve_app, checkpoint(0.1))
    assert retriever.ks == [] and [s.role for s in trace.steps] == ["self-rag"] * 2
    assert seen[1]["messages"][-1] == {"role": "assistant", "content": "[No Retrieval]"}
    assert trace.answer == "Arthur's Magazine was started in 1844."
    assert trace.steps[0].parsed["retrieve"] is False
    # the threshold off: the token written decides ([No Retrieval] at p 0.3 as well)
    trace, _, retriever = await _behind_openai(serve_app, checkpoint(0.3),
                                               "method.self_rag_threshold=null")
    assert retriever.ks == [] and trace.steps[0].parsed["decision"]["from"] == "text"


def _scripted(decide: str = "[Retrieval]", by_title: dict[str, str] | None = None):
    texts = by_title or {t: c[0] for t, c in CONTINUATIONS.items()}

    def reply(messages):
        last = messages[-1]["content"]
        if len(messages) == 1:
            return decide
        if last == "[No Retrieval]":
            return "Arthur's Magazine[Utility:4]"
        return texts[last.removeprefix("[Retrieval]<paragraph>").split("\n")[0]]
    return ScriptedLLM({"self-rag": reply})


async def test_without_probabilities_the_tokens_written_score():
    retriever = Fixed()
    trace = await run_method("self-rag", Q, make_ctx(_scripted(), retriever,
                                                     "method.self_rag_top_k=3"))
    assert retriever.ks == [3]
    # the tokens as written: the first two tie (relevance 1, support 1, utility 1): the
    # first of equals, as the authors' sort keeps it
    cont = [s for s in trace.steps if s.role == "self-rag"][1:]
    assert [c.parsed["critique"]["score"] for c in cont] == [3.0, 3.0, -1.0]
    assert trace.answer == "First for Women"
    assert any("scored by the reflection tokens it wrote" in n for n in trace.notes)
    assert any("the decision reads the token written" in n for n in trace.notes)
    # a continuation that breaks the format is recorded invalid and still scored
    texts = {"First for Women": "First for Women", "Arthur's Magazine":
             "[Relevant]Arthur's Magazine[Partially supported][Utility:4]", "Radio City": ""}
    trace = await run_method("self-rag", Q, make_ctx(_scripted(by_title=texts), Fixed(),
                                                     "method.self_rag_top_k=3"))
    cont = [s for s in trace.steps if s.role == "self-rag"][1:]
    assert [c.valid for c in cont] == [False, True, False]
    assert "[Relevant] or [Irrelevant]" in cont[0].reason
    assert trace.answer == "Arthur's Magazine"


async def test_fixed_modes_skip_the_decision():
    retriever = Fixed()
    trace = await run_method("self-rag", Q, make_ctx(_scripted(decide="[No Retrieval]"),
                                                     retriever, "method.self_rag_mode=always",
                                                     "method.self_rag_top_k=2"))
    assert [s.role for s in trace.steps] == ["R", "self-rag", "self-rag"]
    assert retriever.ks == [2] and all(s.turn >= 1 for s in trace.steps if s.role != "R")
    trace = await run_method("self-rag", Q, make_ctx(_scripted(), Fixed(),
                                                     "method.self_rag_mode=never"))
    assert [s.role for s in trace.steps] == ["self-rag"]
    assert trace.answer == "Arthur's Magazine" and trace.steps[0].parsed["utility"] == 4
    # the decision by the token written: [Retrieval] anywhere in the first token
    trace = await run_method("self-rag", Q, make_ctx(_scripted(decide="Sure"), Fixed()))
    assert [s.role for s in trace.steps] == ["self-rag", "self-rag"]
