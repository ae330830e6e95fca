"""m-ask edge rules: invalid updates become adds, a search with no query stops, the turn cap."""

from __future__ import annotations

from marag.llm.scripted import ScriptedLLM
from marag.types import Question
from marag.workflows import run_method

Q = Question("m1", "Who was born first, Arthur Conan Doyle or Agatha Christie?",
             ["Arthur Conan Doyle"])


async def test_invalid_update_is_an_add_and_turn_cap_ends_the_loop(hotpot_retriever, ctx_for):
    llm = ScriptedLLM({
        "mask.plan": "<q1>When was Arthur Conan Doyle born?</q1><a1>unknown</a1>"
                     "<predicted_answer>unknown</predicted_answer>",
        "mask.search": ["<search>Arthur Conan Doyle birth</search>",
                        "<search>Agatha Christie birth</search>"],
        "mask.summary": ["<evidence>Doyle was born in 1859.</evidence>",
                         "<evidence>No useful information</evidence>"],
        "mask.update": ["<Update>t7</Update>", "<Update>t1</Update>"],
        "mask.answer": "<predicted_answer>Arthur Conan Doyle</predicted_answer>",
    })
    t = await run_method("m-ask", Q, ctx_for(llm, hotpot_retriever, "method.max_turns=2"))
    assert t.status == "ok" and t.answer == "Arthur Conan Doyle"
    assert t.metrics["em"] == 1.0
    upd1, upd2 = [s for s in t.steps if s.role == "mask.update"]
    assert not upd1.valid and upd1.reason and upd2.valid
    assert any("turn 1: invalid update" in n and "add t2" in n for n in t.notes)
    summ2 = [s for s in t.steps if s.role == "mask.summary"][1]
    assert summ2.valid and summ2.parsed == ""
    _, k1, k2 = t.nodes
    # turn 1 appended (invalid index); turn 2 replaced t1 with an empty-evidence pair
    assert (k1.question, k1.answer) == ("Agatha Christie birth", "")
    assert (k2.question, k2.answer) == ("Arthur Conan Doyle birth", "Doyle was born in 1859.")
    # no <end>: the loop stopped at max_turns and answered once, at the last turn
    assert [s.role for s in t.steps].count("mask.search") == 2
    assert (t.steps[-1].role, t.steps[-1].turn) == ("mask.answer", 2)
    assert t.cost.rounds == 3 and t.cost.retrieval_calls == 2


async def test_search_without_query_stops_and_is_recorded(hotpot_retriever, ctx_for):
    llm = ScriptedLLM({
        "mask.plan": "<predicted_answer>Agatha Christie</predicted_answer>",
        "mask.search": "let me think about it",
        "mask.answer": "<predicted_answer>Agatha Christie</predicted_answer>",
    })
    t = await run_method("m-ask", Q, ctx_for(llm, hotpot_retriever,
                                             "method.answer_every_turn=true"))
    assert t.status == "ok" and t.answer == "Agatha Christie"
    assert [s.role for s in t.steps] == ["mask.plan", "mask.search", "mask.answer"]
    assert not t.steps[1].valid and t.steps[1].reason
    assert any("neither a query nor <end>" in n for n in t.notes)
    assert t.metrics["em"] == 0.0 and len(t.nodes) == 1


async def test_repeated_search_runs_but_is_marked_invalid(hotpot_retriever, ctx_for):
    llm = ScriptedLLM({
        "mask.plan": "<predicted_answer>unknown</predicted_answer>",
        "mask.search": ["<search>Agatha Christie birth</search>",
                        "<search>agatha  christie birth</search>", "<end>"],
        "mask.summary": "<evidence>Christie was born in 1890.</evidence>",
        "mask.update": ["<Add>t1</Add>", "<Update>t1</Update>"],
        "mask.answer": "<predicted_answer>Arthur Conan Doyle</predicted_answer>",
    })
    t = await run_method("m-ask", Q, ctx_for(llm, hotpot_retriever, "method.max_turns=3"))
    s1, s2, s3 = [s for s in t.steps if s.role == "mask.search"]
    assert s1.valid and s3.valid
    assert not s2.valid and s2.reason == "repeats an earlier search"
    assert t.cost.retrieval_calls == 2  # the repeated query still ran
