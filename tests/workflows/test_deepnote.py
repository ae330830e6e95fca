"""DeepNote at inference: a first note from the question's passages, update steps that keep a
new note only when the comparison says it is better, the adaptive stop at the first (or
``deepnote_max_failures``-th) update that is not, the step and passage caps, the answer from
the best note, and malformed outputs recorded invalid on their own steps; on the scripted LLM
over the HotpotQA fixture index."""

from __future__ import annotations

from tests.workflows.conftest import make_ctx

from marag.llm.scripted import ScriptedLLM
from marag.retrieval.base import Retriever
from marag.types import Hits, Passage, Question
from marag.workflows import run_method
from marag.workflows.deepnote import MAX_SEARCH_CHARS, search_text

Q = Question(id="q1", question="What government position was held by the woman who portrayed "
             "Corliss Archer in the film Kiss and Tell?", golden_answers=["Chief of Protocol"])
NOTE0 = "Corliss Archer in Kiss and Tell was played by Shirley Temple."
NOTE1 = NOTE0 + " Shirley Temple was later Chief of Protocol of the United States."
NOTE2 = NOTE1 + " She was also an ambassador."


class Spy(Retriever):
    """The fixture index, recording every query and k."""

    name = "spy"

    def __init__(self, inner: Retriever) -> None:
        self.inner, self.searches = inner, []

    def search_batch(self, queries: list[str], k: int) -> list[Hits]:
        self.searches += [(q, k) for q in queries]
        return self.inner.search_batch(queries, k)


def _llm(compare, updates=(NOTE1, NOTE2, NOTE2 + " More."), **extra):
    rules = {"deepnote.init": f"<note>{NOTE0}</note>",
             "deepnote.query": [("<query>Shirley Temple career</query><query>Kiss and Tell "
                                 "cast</query>"), "<query>Shirley Temple ambassador</query>",
                                "<query>Shirley Temple politics</query>"],
             "deepnote.update": [f"<note>{u}</note>" for u in updates],
             "deepnote.compare": [f"<better>{c}</better>" for c in compare],
             "deepnote.answer": "<answer>Chief of Protocol</answer>"}
    rules.update(extra)
    return ScriptedLLM(rules)


def _roles(trace):
    return [s.role.removeprefix("deepnote.") for s in trace.steps]


async def test_the_note_grows_until_an_update_is_not_better(hotpot_retriever):
    spy = Spy(hotpot_retriever)
    trace = await run_method("deepnote", Q, make_ctx(_llm(["yes", "no"]), spy))
    assert trace.status == "ok" and trace.answer == "Chief of Protocol"
    assert trace.metrics["em"] == 1.0
    # round 1: retrieve + first note; two update steps; the second is not better: stop
    assert _roles(trace) == ["R", "init", "query", "R", "update", "compare",
                             "query", "R", "update", "compare", "answer"]
    assert [(s.round, s.turn) for s in trace.steps] == [
        (1, 0), (1, 0), (2, 1), (2, 1), (2, 1), (2, 1), (3, 2), (3, 2), (3, 2), (3, 2), (4, 4)]
    assert all(s.valid for s in trace.steps)
    # the authors' settings: top-5; the step searches its queries, then the question
    assert spy.searches[0] == (Q.question, 5)
    assert spy.searches[1] == ("Shirley Temple career\nKiss and Tell cast\n" + Q.question, 5)
    init, q1, update1, compare1, q2, _update2, compare2, answer = (
        s for s in trace.steps if s.role != "R")
    assert init.messages[-1]["content"].count("Document") == 5
    # the query sees the best note and the earlier queries
    assert f"Note: {NOTE0}" in q1.messages[-1]["content"]
    assert ("Earlier searches: Shirley Temple career; Kiss and Tell cast\n"
            in q2.messages[-1]["content"]) and f"Note: {NOTE1}" in q2.messages[-1]["content"]
    # the update starts from the best note; the comparison shows best (1) and new (2)
    assert f"Note: {NOTE0}\nNew documents:" in update1.messages[-1]["content"]
    assert f"Note 1: {NOTE0}\nNote 2: {NOTE1}" in compare1.messages[-1]["content"]
    assert f"Note 1: {NOTE1}\nNote 2: {NOTE2}" in compare2.messages[-1]["content"]
    # the rejected note never reaches the answer
    assert f"Note: {NOTE1}\n" in answer.messages[-1]["content"]
    assert NOTE2 not in answer.messages[-1]["content"]
    assert "deepnote: 1 update(s) kept, 1 not" in trace.notes
    assert trace.nodes[0].workflow == ["note", "update", "update"]


async def test_more_failures_allowed_and_the_step_cap(hotpot_retriever):
    llm = _llm(["no", "yes", "no"])
    trace = await run_method("deepnote", Q, make_ctx(llm, hotpot_retriever,
                                                     "method.deepnote_max_failures=2"))
    # a failed update does not stop the loop; the third step is the last allowed (3 steps)
    assert _roles(trace).count("compare") == 3
    answer = trace.steps[-1]
    assert f"Note: {NOTE2}\n" in answer.messages[-1]["content"]  # kept at step 2
    trace = await run_method("deepnote", Q, make_ctx(_llm(["yes"] * 5), hotpot_retriever,
                                                     "method.deepnote_max_steps=1"))
    assert _roles(trace) == ["R", "init", "query", "R", "update", "compare", "answer"]
    trace = await run_method("deepnote", Q, make_ctx(_llm([]), hotpot_retriever,
                                                     "method.deepnote_max_steps=0"))
    assert _roles(trace) == ["R", "init", "answer"]


class Overlapping(Retriever):
    """Search n returns passages p(3n) .. p(3n+k-1): each overlaps the one before."""

    name = "overlapping"

    def __init__(self) -> None:
        self.n = 0

    def search_batch(self, queries: list[str], k: int) -> list[Hits]:
        out = []
        for q in queries:
            docs = [Passage(f"p{i}", f"Title {i}", f"Text {i}.")
                    for i in range(3 * self.n, 3 * self.n + k)]
            out.append(Hits(q, docs, [1.0] * k))
            self.n += 1
        return out


async def test_the_passage_cap_keeps_unseen_passages_then_stops():
    trace = await run_method("deepnote", Q, make_ctx(_llm(["yes"] * 3), Overlapping(),
                                                     "method.deepnote_max_passages=8"))
    first, second = (s for s in trace.steps if s.role == "R")
    assert first.doc_ids == [f"p{i}" for i in range(5)]
    assert second.doc_ids == [f"p{i}" for i in range(3, 8)]
    # 5 held + 5 more would pass 8: only the unseen p5, p6, p7 go to the update
    update = next(s for s in trace.steps if s.role == "deepnote.update")
    shown = update.messages[-1]["content"]
    assert shown.count("Document") == 3 and "(Title 5)" in shown and "(Title 3)" not in shown
    # 8 collected: no second step, though every update was better
    assert _roles(trace).count("update") == 1 and trace.steps[-1].role == "deepnote.answer"
    assert any("8 passages collected" in n for n in trace.notes)
    # under the cap, a step's passages go to the update whether seen or not (the authors')
    trace = await run_method("deepnote", Q, make_ctx(_llm(["yes"] * 3), Overlapping()))
    update = next(s for s in trace.steps if s.role == "deepnote.update")
    assert update.messages[-1]["content"].count("Document") == 5


async def test_malformed_outputs_are_recorded_invalid_per_step(hotpot_retriever):
    llm = ScriptedLLM({"deepnote.init": "Shirley Temple played Corliss Archer.",
                       "deepnote.query": "Shirley Temple later career",
                       "deepnote.update": "<note></note>",
                       "deepnote.answer": "Chief of Protocol"})
    spy = Spy(hotpot_retriever)
    trace = await run_method("deepnote", Q, make_ctx(llm, spy))
    assert trace.status == "ok" and trace.answer == "Chief of Protocol"
    init, query, update, answer = (s for s in trace.steps if s.role != "R")
    assert not init.valid and init.parsed == "Shirley Temple played Corliss Archer."
    assert not query.valid and query.parsed == ["Shirley Temple later career"]
    assert spy.searches[1][0] == "Shirley Temple later career\n" + Q.question
    # an update with no note fails without a comparison; the answer reads the first note
    assert not update.valid and update.reason == "empty <note>"
    assert "deepnote.compare" not in {s.role for s in trace.steps}
    assert "Note: Shirley Temple played Corliss Archer." in answer.messages[-1]["content"]
    assert not answer.valid and answer.reason == "no <answer> tag"
    assert any("wrote no note" in n for n in trace.notes)
    # an unreadable comparison keeps the old note and counts as a failed update
    llm = _llm([], **{"deepnote.compare": "Note 2 is better, I think"})
    trace = await run_method("deepnote", Q, make_ctx(llm, hotpot_retriever))
    compare = next(s for s in trace.steps if s.role == "deepnote.compare")
    assert not compare.valid and compare.parsed is False
    assert f"Note: {NOTE0}\n" in trace.steps[-1].messages[-1]["content"]


def test_search_text_is_the_queries_then_the_question_cut_at_500():
    assert search_text([], "Who?") == "Who?"
    assert search_text(["a", "b"], "Who?") == "a\nb\nWho?"
    assert len(search_text(["x" * 600], "Who?")) == MAX_SEARCH_CHARS
