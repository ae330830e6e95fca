import pytest

from marag.roles import get_role
from marag.types import Passage

PLAN, SEARCH, SUMMARY, UPDATE, ANSWER = (get_role(f"mask.{n}") for n in
                                         ("plan", "search", "summary", "update", "answer"))


def t(p):
    return (p.value, p.valid, p.reason)


STATE = [["Who directed Jaws?", "Steven Spielberg"], ["Where was he born?", "unknown"]]


def test_plan_valid():
    text = ("<q1>Who directed Jaws?</q1><a1>Steven Spielberg</a1>\n<q2>Where was he born?</q2>"
            "<a2>unkown</a2><predicted_answer>Cincinnati")
    p = PLAN.parse(text)
    assert p.valid, p.reason
    assert p.value == {"pairs": STATE, "answer": "Cincinnati"}


@pytest.mark.parametrize(
    "text,pairs,answer,reason",
    [
        ("<q1>A?</q1><a1>x</a1>", [["A?", "x"]], "unknown", "no <predicted_answer> tag"),
        ("<q1>A?</q1><q2>B?</q2><a2>y</a2><predicted_answer>y", [["A?", "unknown"], ["B?", "y"]],
         "y", "<q1> has no <a1>"),
        ("<predicted_answer>Paris</predicted_answer>", [], "Paris", "no <qN> sub-question tags"),
        ("<q1></q1><a1>x</a1><predicted_answer>x", [], "x", "no <qN> sub-question tags"),
        ("I think Paris.", [], "unknown", "no <qN> sub-question tags"),
    ],
)
def test_plan_invalid(text, pairs, answer, reason):
    p = PLAN.parse(text)
    assert (p.value, p.valid, p.reason) == ({"pairs": pairs, "answer": answer}, False, reason)


@pytest.mark.parametrize(
    "text,value,valid,reason",
    [
        ("<search>Steven Spielberg birthplace", {"query": "Steven Spielberg birthplace"}, True, ""),
        ("<end>", {"end": True}, True, ""),
        ("<END></END>", {"end": True}, True, ""),
        ("<search>jaws director", {"query": "jaws director"}, False, "repeats an earlier search"),
        ("<search>a</search><end>", {"query": "a"}, False, "both <search> and <end>"),
        ("<search></search>", {"end": True}, False, "empty <search>"),
        ("Let me search for it", {"end": True}, False, "no <search> or <end> tag"),
    ],
)
def test_search(text, value, valid, reason):
    p = SEARCH.parse(text, history=["Jaws  Director"])
    assert (p.value, p.valid, p.reason) == (value, valid, reason)


def test_summary():
    p = SUMMARY.parse("<evidence>Spielberg was born in Cincinnati.")
    assert (p.value, p.valid) == ("Spielberg was born in Cincinnati.", True)
    assert t(SUMMARY.parse("<evidence>No useful information.</evidence>")) == ("", True, "")
    assert t(SUMMARY.parse("<evidence>  </evidence>")) == ("", False, "empty <evidence>")
    assert t(SUMMARY.parse("Spielberg was born\nin Ohio")) == ("Spielberg was born in Ohio", False,
                                                            "no <evidence> tag")


@pytest.mark.parametrize(
    "text,value,valid,reason",
    [
        ("<Update>t2</Update>", {"op": "update", "index": 2}, True, ""),
        ("<update>τ_1", {"op": "update", "index": 1}, True, ""),
        ("<Add>t3</Add>", {"op": "add", "index": 3}, True, ""),
        ("<Update>t5</Update>", {"op": "add", "index": 3}, False, "update index t5 out of range 1..2"),
        ("<Update>t0</Update>", {"op": "add", "index": 3}, False, "update index t0 out of range 1..2"),
        ("<Add>t7</Add>", {"op": "add", "index": 3}, False, "add index t7 should be t3"),
        ("<Add>tn</Add>", {"op": "add", "index": 3}, False, "<add> names no pair index"),
        ("<Update>t1</Update><Add>t3</Add>", {"op": "update", "index": 1}, False,
         "both <Update> and <Add>"),
        ("replace t2", {"op": "add", "index": 3}, False, "no <Update> or <Add> tag"),
    ],
)
def test_update(text, value, valid, reason):
    p = UPDATE.parse(text, n_pairs=2)
    assert (p.value, p.valid, p.reason) == (value, valid, reason)


def test_answer():
    assert t(ANSWER.parse("<predicted_answer>United States")) == ("United States", True, "")
    assert t(ANSWER.parse("United States\nmore")) == ("United States", False, "no <predicted_answer> tag")


def test_builders_show_state_history_query_and_docs():
    q = "In which city was the director of Jaws born?"
    plan = PLAN.build(question=q)
    assert q in plan[-1]["content"] and "<predicted_answer>" in plan[2]["content"]

    history = [["Jaws director", "Jaws was directed by Steven Spielberg."], ["Jaws budget", ""]]
    search = SEARCH.build(question=q, state=STATE, history=history)[-1]["content"]
    assert q in search and "t1 question: Who directed Jaws?\nt1 answer: Steven Spielberg" in search
    assert "t2 question: Where was he born?\nt2 answer: unknown" in search
    # App. C.2: each past query with the summary its search gave (nothing found is said so)
    assert "1. query: Jaws director\n1. found: Jaws was directed by Steven Spielberg." in search
    assert "2. query: Jaws budget\n2. found: No useful information" in search

    docs = [Passage("x", "Steven Spielberg", "Born in Cincinnati, Ohio.")]
    summary = SUMMARY.build(question=q, query="Spielberg birthplace", docs=docs)[-1]["content"]
    assert "Query: Spielberg birthplace" in summary
    assert "Document0: (Steven Spielberg) Born in Cincinnati, Ohio." in summary

    update = UPDATE.build(question=q, state=STATE, query="Spielberg birthplace",
                          evidence="Born in Cincinnati.")[-1]["content"]
    assert "t2 question: Where was he born?" in update and "Evidence: Born in Cincinnati." in update
    assert "New query: Spielberg birthplace" in update

    answer = ANSWER.build(question=q, state=STATE)
    assert "t1 question: Who directed Jaws?" in answer[-1]["content"]
    assert answer[2]["content"] == "<predicted_answer>United States</predicted_answer>"
    for role, example in ((SEARCH, "<search>"), (SUMMARY, "<evidence>"), (UPDATE, "<Update>")):
        assert [m["role"] for m in role.build(**_inputs(role.name, q))] == [
            "system", "user", "assistant", "user"]
        assert role.build(**_inputs(role.name, q))[2]["content"].startswith(example)


def _inputs(name, q):
    return {
        "mask.search": {"question": q, "state": STATE, "history": []},
        "mask.summary": {"question": q, "query": "x", "docs": []},
        "mask.update": {"question": q, "state": STATE, "query": "x", "evidence": ""},
    }[name]
