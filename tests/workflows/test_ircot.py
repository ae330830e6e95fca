"""IRCoT at inference on the scripted LLM: a retrieval after each sentence of the chain, the
"So the answer is:" stop, the step cap, paragraphs collected without duplicates up to the
cap, the reader, and every malformed step recorded on its own Step."""

from __future__ import annotations

from tests.workflows.conftest import make_ctx

from marag.llm.scripted import ScriptedLLM
from marag.retrieval.base import Retriever
from marag.types import Hits, Passage, Question
from marag.workflows import run_method

Q = Question(id="q1", question="What government position was held by the woman who portrayed "
             "Corliss Archer in the film Kiss and Tell?", golden_answers=["Chief of Protocol"])
S1 = "Corliss Archer in the film Kiss and Tell was portrayed by Shirley Temple."
S2 = "Shirley Temple served as Chief of Protocol of the United States."
S3 = "So the answer is: Chief of Protocol."
READER = "Temple played Corliss Archer and was Chief of Protocol. So the answer is: Chief of Protocol."


def _calls(trace, role="ircot"):
    return [s for s in trace.steps if s.role == role]


class Table(Retriever):
    """Each query's passages from a table (by its first word), the top k of them."""

    name = "table"

    def __init__(self, table: dict[str, list[Passage]]) -> None:
        self.table = table

    def search_batch(self, queries: list[str], k: int) -> list[Hits]:
        out = []
        for q in queries:
            ps = self.table[q.split()[0]][:k]
            out.append(Hits(q, ps, [1.0] * len(ps)))
        return out


def P(i: int | str, title: str | None = None, text: str | None = None) -> Passage:
    return Passage(f"p{i}", title or f"Title {i}", text or f"Text of passage {i}.")


async def test_each_sentence_retrieves_then_the_reader_answers(hotpot_retriever):
    llm = ScriptedLLM({"ircot": [S1, S2 + " More text that is cut.", S3, READER]})
    trace = await run_method("ircot", Q, make_ctx(llm, hotpot_retriever))
    assert trace.status == "ok" and trace.answer == "Chief of Protocol"
    assert [s.role for s in trace.steps] == ["R", "ircot", "R", "ircot", "R", "ircot", "ircot"]
    # the question, then each sentence of the chain, is the query; K=6 paragraphs each
    assert [s.raw for s in _calls(trace, "R")] == [Q.question, S1, S2]
    assert all(len(s.doc_ids) == 6 for s in _calls(trace, "R"))
    first, second, third, reader = _calls(trace)
    assert second.parsed == {"sentence": S2, "answer": None}  # only its first sentence kept
    assert third.parsed == {"sentence": S3, "answer": "Chief of Protocol"}
    # each step sees every paragraph collected so far and continues the chain so far
    assert first.messages[-1]["role"] == "user"
    assert first.messages[-1]["content"].count("Wikipedia Title: ") == 6
    assert first.messages[-1]["content"].endswith("Q: " + Q.question)
    assert second.messages[-1] == {"role": "assistant", "content": S1}
    assert third.messages[-1] == {"role": "assistant", "content": S1 + " " + S2}
    # a continued chain may not end its turn before its first token; a fresh one may
    assert [(s.sampling or {}).get("min_tokens") for s in (first, second, third, reader)] == [
        None, 1, 1, None]
    seen = len(set(_calls(trace, "R")[0].doc_ids) | set(_calls(trace, "R")[1].doc_ids))
    assert second.messages[-2]["content"].count("Wikipedia Title: ") == seen
    # the reader: every collected paragraph, a chain of its own, the answer from its line
    held = len({d for s in _calls(trace, "R") for d in s.doc_ids})
    assert reader.messages[-1]["role"] == "user"
    assert reader.messages[0] != first.messages[0]  # the CoT reader's own instruction
    assert reader.messages[-1]["content"].count("Wikipedia Title: ") == min(held, 15)
    assert reader.parsed["answer"] == "Chief of Protocol" and reader.valid
    assert [(s.round, s.turn) for s in trace.steps] == [(1, 0), (1, 1), (1, 1), (2, 2),
                                                        (2, 2), (3, 3), (4, 4)]
    assert trace.cost.llm_calls == 4 and trace.cost.retrieval_calls == 3
    assert trace.metrics["em"] == 1.0


async def test_steps_keep_their_prompts_cached_and_stop_at_their_first_sentence(hotpot_retriever):
    from marag.roles.ircot import sentence_done

    llm = ScriptedLLM({"ircot": [S1, S2, S3, READER]})
    trace = await run_method("ircot", Q, make_ctx(llm, hotpot_retriever))
    assert trace.status == "ok"
    steps, reader = llm.params[:3], llm.params[3]
    assert all(p.stop_when is sentence_done and p.cache_prompt for p in steps)
    assert [p.min_tokens for p in steps] == [0, 1, 1]  # a continued chain writes a token
    assert reader.stop_when is None  # the reader keeps its whole line
    assert not reader.cache_prompt  # and no later call repeats its prompt
    # the trace says how each step was decoded
    recorded = [s.sampling for s in _calls(trace)]
    assert [r.get("stop_when") for r in recorded] == ["marag.roles.ircot.sentence_done"] * 3 + [None]
    assert [r.get("cache_prompt", False) for r in recorded] == [True] * 3 + [False]


async def test_cot_answer_skips_the_reader(hotpot_retriever):
    llm = ScriptedLLM({"ircot": [S1, ("Temple was Chief of Protocol, so the answer is: "
                                      "Chief of Protocol.")]})
    ctx = make_ctx(llm, hotpot_retriever, "method.ircot_answer=cot", "method.ircot_top_k=2")
    trace = await run_method("ircot", Q, ctx)
    assert [s.role for s in trace.steps] == ["R", "ircot", "R", "ircot"]
    assert all(len(s.doc_ids) == 2 for s in _calls(trace, "R"))
    assert trace.answer == "Chief of Protocol" and trace.metrics["em"] == 1.0


async def test_step_cap_then_the_reader(hotpot_retriever):
    llm = ScriptedLLM({"ircot": [S1, S2, "Shirley Temple was an actress.", READER]})
    ctx = make_ctx(llm, hotpot_retriever, "method.ircot_steps=3", "method.ircot_answer=cot")
    trace = await run_method("ircot", Q, ctx)
    steps = _calls(trace)
    assert len(steps) == 4 and all(s.valid for s in steps)
    # no retrieval after the last step: nothing would read it
    assert [s.raw for s in _calls(trace, "R")] == [Q.question, S1, S2]
    assert any("no answer after 3 reasoning steps" in n for n in trace.notes)
    assert steps[-1].messages[0]["content"] != steps[0].messages[0]["content"]  # the reader
    assert trace.answer == "Chief of Protocol"


async def test_direct_reader_repeats_a_step_prompt_and_answers_alone(hotpot_retriever):
    llm = ScriptedLLM({"ircot": [S1, S2, "Shirley Temple was an actress.", "Chief of Protocol"]})
    ctx = make_ctx(llm, hotpot_retriever, "method.ircot_steps=3", "method.ircot_answer=direct")
    trace = await run_method("ircot", Q, ctx)
    steps = _calls(trace)
    assert len(steps) == 4 and all(s.valid for s in steps)
    last_step, reader = steps[2].messages, steps[3].messages
    # the same instruction, example and paragraphs as the last step, then the request
    assert reader[:3] == last_step[:3]
    assert reader[3]["content"].startswith(last_step[3]["content"] + "\n\n")
    assert trace.answer == "Chief of Protocol" and trace.metrics["em"] == 1.0


async def test_paragraphs_deduplicated_and_capped():
    same_text = P("x", "Title 2", "Text of passage 2.")  # another id, the same paragraph
    table = {"What": [P(1), P(2), P(3)], "First": [P(2), same_text, P(4)],
             "Second": [P(5), P(6), P(7)], "Third": [P(8)]}
    llm = ScriptedLLM({"ircot": ["First sentence.", "Second sentence.", "Third sentence.",
                                 "So the answer is: Chief of Protocol.", READER]})
    ctx = make_ctx(llm, Table(table), "method.ircot_top_k=3", "method.ircot_max_paragraphs=5")
    trace = await run_method("ircot", Q, ctx)
    steps = _calls(trace)
    titles = [[line for line in s.messages[-2 if i else -1]["content"].splitlines()
               if line.startswith("Wikipedia Title: ")] for i, s in enumerate(steps[:4])]
    assert titles[0] == [f"Wikipedia Title: Title {i}" for i in (1, 2, 3)]
    assert titles[1] == [f"Wikipedia Title: Title {i}" for i in (1, 2, 3, 4)]  # no repeats
    assert titles[2] == [f"Wikipedia Title: Title {i}" for i in (1, 2, 3, 4, 5)]  # the cap
    # the cap reached: the third sentence searches nothing
    assert [s.raw for s in _calls(trace, "R")] == [Q.question, "First sentence.",
                                                   "Second sentence."]
    assert steps[-1].messages[-1]["content"].count("Wikipedia Title: ") == 5


async def test_reasoning_and_repeated_sentences_search_nothing():
    table = {"What": [P(1)], "Temple": [P(2)]}
    llm = ScriptedLLM({"ircot": ["Thus she acted as a child.", "Temple was a diplomat.",
                                 "Temple was a diplomat.", "So she held a post, 2 + 1 = 3.",
                                 "So the answer is: x.", READER]})
    trace = await run_method("ircot", Q, make_ctx(llm, Table(table)))
    assert [s.raw for s in _calls(trace, "R")] == [Q.question, "Temple was a diplomat."]


async def test_malformed_steps_recorded_invalid(hotpot_retriever):
    llm = ScriptedLLM({"ircot": [S1, "\nSo the answer is:", "Chief of Protocol"]})
    trace = await run_method("ircot", Q, make_ctx(llm, hotpot_retriever))
    first, empty, reader = _calls(trace)
    assert first.valid
    # a reply cut at its first line end is empty: the step is invalid and the chain ends
    assert not empty.valid and empty.reason == "empty reply"
    assert any("step 2 wrote no usable sentence (empty reply)" in n for n in trace.notes)
    # the reader wrote no "answer is": its whole line is the answer, recorded invalid
    assert not reader.valid and "whole reply is the answer" in reader.reason
    assert trace.answer == "Chief of Protocol" and trace.status == "ok"
    assert [s.role for s in trace.steps] == ["R", "ircot", "R", "ircot", "ircot"]

    llm = ScriptedLLM({"ircot": ["So the answer is:", READER]})
    trace = await run_method("ircot", Q, make_ctx(llm, hotpot_retriever,
                                                  "method.ircot_answer=cot"))
    bad, reader = _calls(trace)
    assert not bad.valid and bad.reason == 'nothing after "answer is"'
    assert reader.valid and trace.answer == "Chief of Protocol"


async def test_empty_question_is_a_recorded_failure(hotpot_retriever):
    llm = ScriptedLLM({"ircot": READER})
    trace = await run_method("ircot", Question(id="e", question="  "),
                             make_ctx(llm, hotpot_retriever))
    assert trace.status == "failed" and not trace.steps and not llm.calls
