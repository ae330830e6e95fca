"""Search-o1 at inference: a query between the markers searches the top 10, Reason-in-Documents
condenses them into the reasoning, the reasoning goes on as one continued text, searches past
the limit (or repeated) are refused with a note, the answer is the reasoning's \\boxed{}, and
every malformed output is recorded invalid on its own step; on the scripted LLM and behind the
openai backend against a scripted OpenAI-compatible server."""

from __future__ import annotations

import re
from dataclasses import replace

from tests.workflows.conftest import make_ctx, run_behind_openai, scripted_chat_app

from marag.llm.scripted import ScriptedLLM
from marag.retrieval.base import Retriever
from marag.roles.search_o1 import (
    BEGIN_RESULT,
    END_QUERY,
    END_RESULT,
    LIMIT_NOTE,
    NO_INFO,
    REPEAT_NOTE,
    refusal,
    result,
)
from marag.types import Hits, Question
from marag.workflows import run_method

Q = Question(id="q1", question="Which magazine was started first, Arthur's Magazine or "
             "First for Women?", golden_answers=["Arthur's Magazine"])
SEARCH = ("I need the founding years of both magazines.\n"
          "<|begin_search_query|> Arthur's Magazine <|end_search_query|>")
RID = ("Document 1 says it was an American literary periodical of 1844.\n\n"
       "**Final Information**\n\nArthur's Magazine was started in 1844.")
ANSWER = "First for Women began in 1989, so the earlier one is \\boxed{Arthur's Magazine}."


class Spy(Retriever):
    """The fixture index, recording the k of every search."""

    name = "spy"

    def __init__(self, inner: Retriever) -> None:
        self.inner, self.ks = inner, []

    def search_batch(self, queries: list[str], k: int) -> list[Hits]:
        self.ks.append(k)
        return self.inner.search_batch(queries, k)


def _calls(trace, role="search-o1"):
    return [s for s in trace.steps if s.role == role]


async def test_search_reason_in_documents_then_boxed_answer(hotpot_retriever):
    llm = ScriptedLLM({"search-o1": [SEARCH, ANSWER], "search-o1.rid": RID})
    spy = Spy(hotpot_retriever)
    trace = await run_method("search-o1", Q, make_ctx(llm, spy))
    assert trace.status == "ok" and trace.answer == "Arthur's Magazine"
    assert [s.role for s in trace.steps] == ["search-o1", "R", "search-o1.rid", "search-o1"]
    first, search, rid, second = trace.steps
    # decoding stopped at the end marker, which the backend cut and marag put back
    assert first.raw.endswith(END_QUERY) and first.valid
    assert first.parsed == {"action": "search", "content": "Arthur's Magazine"}
    assert search.raw == "Arthur's Magazine" and spy.ks == [10]  # the authors' top-10
    n = len(search.doc_ids)
    # Reason-in-Documents: previous steps (the query turn included), the query, the documents;
    # not the question (the authors' prompt has none)
    prompt = rid.messages[0]["content"]
    assert [m["role"] for m in rid.messages] == ["user"]
    assert "Step 1: I need the founding years" in prompt
    assert "Step 2: <|begin_search_query|> Arthur's Magazine <|end_search_query|>" in prompt
    assert len(re.findall(r"\*\*Document \d+\*\* \(Title: ", prompt)) == n > 0
    assert f"**Document 1** (Title: {search.parsed['titles'][0]})" in prompt
    assert Q.question not in prompt
    assert rid.valid and rid.parsed == "Arthur's Magazine was started in 1844."
    # the extraction goes into the reasoning between the result markers; the reasoning goes on
    # as one open assistant turn
    assert [m["role"] for m in first.messages] == ["user"]
    assert [m["role"] for m in second.messages] == ["user", "assistant"]
    assert second.messages[-1]["content"] == (
        first.raw + f"\n\n{BEGIN_RESULT}Arthur's Magazine was started in 1844.{END_RESULT}\n\n")
    user = first.messages[0]["content"]
    assert "<|begin_search_query|>" in user and "at most 10 searches" in user and "\\boxed{" in user
    assert user.rstrip().endswith(Q.question)
    assert [s.turn for s in trace.steps] == [1, 1, 1, 2]
    assert trace.cost.llm_calls == 3 and trace.cost.retrieval_calls == 1
    assert trace.metrics["em"] == 1.0 and not trace.notes


async def test_search_limit_refuses_with_a_note(hotpot_retriever):
    llm = ScriptedLLM({"search-o1": [
        SEARCH,
        "Now the other one.\n<|begin_search_query|>First for Women<|end_search_query|>",
        ANSWER,
    ], "search-o1.rid": RID})
    trace = await run_method("search-o1", Q, make_ctx(llm, hotpot_retriever,
                                                      "method.search_o1_max_searches=1"))
    steps = _calls(trace)
    assert [s.role for s in trace.steps] == [
        "search-o1", "R", "search-o1.rid", "search-o1", "search-o1"]
    assert [s.valid for s in steps] == [True, False, True]
    assert steps[1].reason == "searched past the limit of 1 searches (refused)"
    assert "at most 1 searches" in steps[0].messages[0]["content"]
    # the refusal goes into the reasoning instead of documents, and the reasoning goes on
    assert steps[2].messages[-1]["content"] == (
        steps[0].raw + result("Arthur's Magazine was started in 1844.") + steps[1].raw
        + refusal(LIMIT_NOTE))
    assert trace.answer == "Arthur's Magazine" and trace.cost.retrieval_calls == 1


async def test_a_repeated_query_is_not_searched_again(hotpot_retriever):
    again = "Again.\n<|begin_search_query|>Arthur's Magazine<|end_search_query|>"
    llm = ScriptedLLM({"search-o1": [SEARCH, again, ANSWER], "search-o1.rid": RID})
    trace = await run_method("search-o1", Q, make_ctx(llm, hotpot_retriever))
    steps = _calls(trace)
    assert len(_calls(trace, "R")) == 1 and all(s.valid for s in steps)
    assert steps[2].messages[-1]["content"].endswith(steps[1].raw + refusal(REPEAT_NOTE))
    assert trace.answer == "Arthur's Magazine"


async def test_turn_cap_ends_without_answer(hotpot_retriever):
    queries = iter(range(100))
    llm = ScriptedLLM({
        "search-o1": lambda m: f"More.\n<|begin_search_query|>query {next(queries)}"
                               "<|end_search_query|>",
        "search-o1.rid": RID})
    trace = await run_method("search-o1", Q, make_ctx(llm, hotpot_retriever,
                                                      "method.search_o1_max_turns=3"))
    assert len(_calls(trace)) == 3 and len(_calls(trace, "R")) == 3
    assert len(_calls(trace, "search-o1.rid")) == 3 and trace.cost.rounds == 3
    assert trace.status == "ok" and trace.answer == "" and trace.metrics["f1"] == 0.0
    assert any("no final answer in 3 turns" in n for n in trace.notes)


async def test_the_last_boxed_of_an_earlier_turn_answers_when_the_last_has_none(hotpot_retriever):
    guess = ("My guess is \\boxed{Arthur's Magazine}; let me check.\n"
             "<|begin_search_query|>Arthur's Magazine<|end_search_query|>")
    llm = ScriptedLLM({"search-o1": [guess, "That settles it."], "search-o1.rid": RID})
    trace = await run_method("search-o1", Q, make_ctx(llm, hotpot_retriever))
    steps = _calls(trace)
    # a turn that ends in a query searches even when it guessed an answer before it
    assert steps[0].parsed["action"] == "search" and len(_calls(trace, "R")) == 1
    assert steps[1].valid is False
    assert steps[1].reason == "no search query and no \\boxed{} answer"
    assert trace.answer == "Arthur's Magazine"
    assert any("turn 2 ended the reasoning" in n and "last \\boxed{}" in n for n in trace.notes)


async def test_malformed_outputs_are_recorded_invalid_per_step(hotpot_retriever):
    llm = ScriptedLLM({"search-o1": [SEARCH, "I think it is Arthur's Magazine."],
                       "search-o1.rid": "Both documents mention magazines."})
    trace = await run_method("search-o1", Q, make_ctx(llm, hotpot_retriever))
    rid, = _calls(trace, "search-o1.rid")
    # an extraction without its section is invalid; the authors' fallback goes in instead
    assert rid.valid is False and rid.reason == "no **Final Information** section"
    steps = _calls(trace)
    assert steps[1].messages[-1]["content"].endswith(result(NO_INFO))
    assert [s.valid for s in steps] == [True, False]
    assert trace.answer == "" and trace.status == "ok"
    assert any("no \\boxed{} answer anywhere" in n for n in trace.notes)


async def test_empty_query_and_unclosed_query_end_the_reasoning(hotpot_retriever):
    llm = ScriptedLLM({"search-o1": "Let me look.\n<|begin_search_query|>  <|end_search_query|>"})
    trace = await run_method("search-o1", Q, make_ctx(llm, hotpot_retriever))
    [step] = trace.steps
    assert step.valid is False and step.reason == "empty search query"
    assert trace.answer == ""

    llm = ScriptedLLM({"search-o1": "Let me look.\n<|begin_search_query|>Arthur's Maga"})
    orig = llm.generate

    async def cut(batch, params):  # a reply cut by max_tokens keeps no end marker
        return [replace(c, finish_reason="length") for c in await orig(batch, params)]

    llm.generate = cut  # type: ignore[method-assign]
    trace = await run_method("search-o1", Q, make_ctx(llm, hotpot_retriever))
    [step] = trace.steps
    assert step.valid is False and step.reason == "search query never closed"
    assert not step.raw.endswith(END_QUERY) and not _calls(trace, "R")


async def test_empty_question_is_a_recorded_failure(hotpot_retriever):
    llm = ScriptedLLM({"search-o1": ANSWER})
    trace = await run_method("search-o1", Question(id="e", question="  "),
                             make_ctx(llm, hotpot_retriever))
    assert trace.status == "failed" and not trace.steps and not llm.calls


async def test_protocol_over_openai_backend(serve_app, hotpot_retriever):
    """A scripted OpenAI-compatible server: it stops on <|end_search_query|> (dropping it, as
    the API does) and is asked to continue the open assistant turn."""
    def reply(body: dict) -> str:
        last = body["messages"][-1]
        if "**Final Information**" in last["content"] and last["role"] == "user":
            return RID
        if last["role"] == "user":
            return SEARCH + "\nnever reached"
        assert f"{BEGIN_RESULT}Arthur's Magazine was started in 1844." in last["content"]
        return ANSWER

    app, seen = scripted_chat_app(reply)

    trace = await run_behind_openai(serve_app, app, "search-o1", Q, hotpot_retriever,
                                    "Qwen/QwQ-32B")
    assert trace.status == "ok" and trace.answer == "Arthur's Magazine"
    assert [s.role for s in trace.steps] == ["search-o1", "R", "search-o1.rid", "search-o1"]
    assert seen[0]["stop"] == [END_QUERY] and seen[0]["max_tokens"] == 1024
    assert "continue_final_message" not in seen[0] and "continue_final_message" not in seen[1]
    assert seen[2]["continue_final_message"] is True
    assert seen[2]["messages"][-1]["content"].startswith(SEARCH + "\n\n" + BEGIN_RESULT)
