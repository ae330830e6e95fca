"""Search-R1 at inference: the trajectory as one continued text, the paper's tags, top-3
searches, the turn budget, and every malformed turn recorded on its own step; on the scripted
LLM and, unchanged, behind the openai backend against a scripted OpenAI-compatible server."""

from __future__ import annotations

import re

from tests.workflows.conftest import make_ctx, run_behind_openai, scripted_chat_app

from marag.llm.scripted import ScriptedLLM
from marag.roles.search_r1 import INVALID_NOTE
from marag.types import Question
from marag.workflows import run_method

Q = Question(id="q1", question="Which magazine was started first, Arthur's Magazine or "
             "First for Women?", golden_answers=["Arthur's Magazine"])


def _calls(trace, role="search-r1"):
    return [s for s in trace.steps if s.role == role]


async def test_searches_read_information_then_answers(hotpot_retriever):
    llm = ScriptedLLM({"search-r1": [
        ("<think>I need the founding year of Arthur's Magazine.</think>\n"
         "<search> Arthur's Magazine </search>"),
        ("<think>It began in 1844; First for Women began in 1989.</think>\n"
         "<answer> Arthur's Magazine </answer>"),
    ]})
    trace = await run_method("search-r1", Q, make_ctx(llm, hotpot_retriever))
    assert trace.status == "ok" and trace.answer == "Arthur's Magazine"
    assert [s.role for s in trace.steps] == ["search-r1", "R", "search-r1"]
    first, search, second = trace.steps
    # the closing tag the backend cut off is put back; the action is the search block
    assert first.raw.endswith("</search>")
    assert first.parsed == {"action": "search", "content": "Arthur's Magazine"}
    assert search.raw == "Arthur's Magazine" and len(search.doc_ids) == 3  # top-3
    # the second call continues one assistant text: the first turn, then <information>
    assert [m["role"] for m in first.messages] == ["user"]
    assert [m["role"] for m in second.messages] == ["user", "assistant"]
    text = second.messages[-1]["content"]
    assert text.startswith(first.raw + "\n\n<information>Doc 1(Title: ")
    assert text.endswith("</information>\n\n")
    assert len(re.findall(r"Doc \d\(Title: ", text)) == 3
    assert "<search>" in first.messages[0]["content"] and Q.question in first.messages[0]["content"]
    assert [s.turn for s in trace.steps] == [1, 1, 2]
    assert trace.cost.llm_calls == 2 and trace.cost.retrieval_calls == 1
    assert trace.metrics["em"] == 1.0


async def test_unreadable_turn_is_recorded_and_corrected(hotpot_retriever):
    llm = ScriptedLLM({"search-r1": [
        "I think the answer is Arthur's Magazine.",  # no tag at all
        "<think>again</think><search>   </search>",  # an empty query
        "<answer>Arthur's Magazine</answer>",
    ]})
    trace = await run_method("search-r1", Q, make_ctx(llm, hotpot_retriever))
    steps = _calls(trace)
    assert [s.valid for s in steps] == [False, False, True]
    assert steps[0].reason == "no <search> or <answer> block"
    assert steps[1].reason == "empty <search> block"
    # an unreadable action searches nothing; the next call sees the correction note instead
    assert not any(s.role == "R" for s in trace.steps)
    assert steps[1].messages[-1]["content"].endswith(INVALID_NOTE)
    assert steps[2].messages[-1]["content"].count(INVALID_NOTE) == 2
    assert trace.answer == "Arthur's Magazine"


async def test_turn_budget_spent_ends_without_answer(hotpot_retriever):
    llm = ScriptedLLM({"search-r1": "<think>more</think><search>First for Women</search>"})
    ctx = make_ctx(llm, hotpot_retriever, "method.search_turns=2")
    trace = await run_method("search-r1", Q, ctx)
    steps = _calls(trace)
    assert len(steps) == 3 and len(_calls(trace, "R")) == 2  # 2 searches, then the last call
    assert [s.valid for s in steps] == [True, True, False]
    assert "budget of 2 searches was spent" in steps[-1].reason
    assert trace.answer == "" and trace.metrics["f1"] == 0.0
    assert any("no <answer> in 3 calls" in n for n in trace.notes)


async def test_unclosed_block_cut_by_length_is_invalid(hotpot_retriever):
    llm = ScriptedLLM({"search-r1": ["<think>long</think><answer>Arthur's Maga",
                                     "<answer>Arthur's Magazine</answer>"]})
    # a reply cut by max_tokens keeps no closing tag: with finish_reason "length" it is invalid
    from dataclasses import replace

    orig = llm.generate
    calls = []

    async def cut_first(batch, params):
        out = await orig(batch, params)
        calls.append(1)
        return [replace(c, finish_reason="length") for c in out] if len(calls) == 1 else out

    llm.generate = cut_first  # type: ignore[method-assign]
    trace = await run_method("search-r1", Q, make_ctx(llm, hotpot_retriever))
    steps = _calls(trace)
    assert steps[0].valid is False and steps[0].reason == "<answer> was never closed"
    assert trace.answer == "Arthur's Magazine"


async def test_empty_question_is_a_recorded_failure(hotpot_retriever):
    llm = ScriptedLLM({"search-r1": "<answer>x</answer>"})
    trace = await run_method("search-r1", Question(id="e", question="  "),
                             make_ctx(llm, hotpot_retriever))
    assert trace.status == "failed" and not trace.steps


async def test_released_checkpoint_protocol_over_openai_backend(serve_app, hotpot_retriever):
    """A scripted OpenAI-compatible server that speaks Search-R1's tags, as a released
    checkpoint behind vLLM does: it stops on </search> (dropping it, as the API does) and is
    asked to continue the open assistant turn."""

    def reply(body: dict) -> str:
        last = body["messages"][-1]
        if last["role"] == "user":
            return "<think>Look it up.</think>\n<search> Arthur's Magazine </search>"
        assert "<information>Doc 1(Title: " in last["content"]
        return "<think>1844 is earlier.</think>\n<answer> Arthur's Magazine </answer>"

    app, seen = scripted_chat_app(reply)
    trace = await run_behind_openai(serve_app, app, "search-r1", Q, hotpot_retriever,
                                    "SearchR1-nq_hotpotqa_train-qwen2.5-7b-em-ppo")
    assert trace.status == "ok" and trace.answer == "Arthur's Magazine"
    assert [s.role for s in trace.steps] == ["search-r1", "R", "search-r1"]
    assert seen[0]["stop"] == ["</search>", "</answer>"] and seen[0]["max_tokens"] == 500
    assert "continue_final_message" not in seen[0]
    assert seen[1]["continue_final_message"] is True
    assert seen[1]["add_generation_prompt"] is False
    assert seen[1]["messages"][-1]["content"].startswith(
        "<think>Look it up.</think>\n<search> Arthur's Magazine </search>\n\n<information>")
