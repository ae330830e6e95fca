"""The ``paper`` prompt profile: each paper's own output formats parse, and the profile's
roles take the inputs the workflows give the default roles."""

from __future__ import annotations

import inspect

import pytest

from marag.roles import PROFILES, ROLES, get_role, role_for
from marag.types import Passage

DOCS = [Passage(f"d{i}", f"T{i}", f"text {i}") for i in range(10)]


def mao(name: str):  # type: ignore[no-untyped-def]
    return role_for(name, "paper", "mao-arag")


def t(p):  # type: ignore[no-untyped-def]
    return p.value, p.valid


def test_profile_lookup():
    assert role_for("AG") is get_role("AG")
    assert role_for("AG", "default", "mao-arag") is get_role("AG")
    assert role_for("AG", "paper", "mao-arag") is not get_role("AG")
    assert role_for("planner", "paper", "jade") is get_role("planner")  # formats are the same
    assert role_for("DS", "paper", "mmoa-rag") is role_for("DS", "paper", "mao-arag")
    assert role_for("AG", "paper", "vanilla") is get_role("AG")
    with pytest.raises(KeyError, match="unknown prompt profile"):
        role_for("AG", "papers", "jade")


@pytest.mark.parametrize("method,name", [
    (m, n) for m, roles in PROFILES["paper"].items() for n in roles])
def test_paper_roles_replace_a_default_role_and_take_its_inputs(method, name):
    role, default = role_for(name, "paper", method), ROLES[name]
    assert role.name == name
    # every input the default builder names is one the paper builder takes
    own = inspect.signature(role.build).parameters
    takes_any = any(p.kind is p.VAR_KEYWORD for p in own.values())
    assert takes_any or set(inspect.signature(default.build).parameters) <= set(own)
    assert (role.parse_context is None) == (default.parse_context is None) or name == "DS"


# ------------------------------------------------------------------ MAO-ARAG (App. C, App. E)

@pytest.mark.parametrize("text,codes", [
    ("RA, AG", ["R", "AG"]),  # Case 2: "Planner: RA, AG"
    ("AG", ["AG"]),  # Case 1
    ("QDP", ["QDP"]),  # Case 3, Turn 0
    ("<workflow>RA, DS, AG</workflow>", ["R", "DS", "AG"]),
    ("QR, RA, DS, AG", ["QR", "R", "DS", "AG"]),
])
def test_mao_planner_reads_the_case_studies_plans(text, codes):
    assert t(mao("planner").parse(text)) == (codes, True)


def test_mao_planner_as_turn():
    p = mao("planner")
    ctx = p.parse_context(question="q", pairs=[("a?", "x")])
    assert t(p.parse("AS", **ctx)) == (["AS"], True)  # Case 3, Turn 2: "planner: AS"
    bad = p.parse("RA, AG", **ctx)
    assert bad.valid is False and "only plan is AS" in bad.reason
    fresh = p.parse("AS", **p.parse_context(question="q"))
    assert fresh.valid is False and "has none" in fresh.reason
    assert p.parse("I would retrieve first.").valid is False


def test_default_planner_reads_ra_and_the_as_turn():
    p = get_role("planner")
    assert t(p.parse("<workflow>RA, AG</workflow>")) == (["R", "AG"], True)
    ctx = p.parse_context(question="q", pairs=[("a?", "x")])
    assert t(p.parse("<workflow>AS</workflow>", **ctx)) == (["AS"], True)
    assert "Answered sub-questions" in p.build(question="q", pairs=[("a?", "x")])[-1]["content"]


CASE3_SUBS = [
    "How many members are in the performance act Badly Drawn Boy?",
    "How many instruments are typically used in a performance by Badly Drawn Boy?",
    "How many members are in the performance act Wolf Alice?",
    "How many instruments are typically used in a performance by Wolf Alice?",
]


@pytest.mark.parametrize("name", ["QDS", "QDP"])
def test_mao_decomposers_read_one_sub_question_per_line(name):
    role = mao(name)
    assert t(role.parse("\n".join(CASE3_SUBS))) == (CASE3_SUBS, True)  # Tables 8-9
    numbered = "\n".join(f"{i}. {q}" for i, q in enumerate(CASE3_SUBS[:2], 1))
    assert t(role.parse(numbered)) == (CASE3_SUBS[:2], True)
    assert t(role.parse("<q1>a?</q1><q2>b?</q2>")) == (["a?", "b?"], True)
    over = role.parse("\n".join(f"q{i}?" for i in range(6)), **role.parse_context(max_items=4))
    assert over.valid is False and len(over.value) == 4
    assert role.parse("  \n").valid is False
    assert role.parse("a?\na?").valid is False
    shown = role.build(question="Q?", max_items=4)
    assert "one per line" in shown[-1]["content"] and "Q?" in shown[-1]["content"]


def test_mao_rewriter_reads_plain_text():
    qr = mao("QR")
    assert t(qr.parse("In what city is Columbia University located?")) == (
        "In what city is Columbia University located?", True)  # Table 10: no formatting
    assert t(qr.parse('"Columbia University city"\n')) == ("Columbia University city", True)
    assert t(qr.parse("<query>x y</query>")) == ("x y", True)
    empty = qr.parse("", **qr.parse_context(question="orig?"))
    assert empty.value == "orig?" and empty.valid is False
    prompt = qr.build(question="this city?", context=[("a?", "b")], original="orig?")
    text = prompt[-1]["content"]
    assert "Original question: orig?" in text and "a? -> b" in text and "this city?" in text


@pytest.mark.parametrize("method", ["mao-arag", "mmoa-rag"])
def test_paper_selector_reads_bare_document_ids(method):
    ds = role_for("DS", "paper", method)
    ctx = ds.parse_context(question="q", docs=DOCS)
    assert t(ds.parse("Document0,Document4,Document6,Document7", **ctx)) == ([0, 4, 6, 7], True)
    assert t(ds.parse("Document0,Document3,Document9", **ctx)) == ([0, 3, 9], True)  # MMOA 4.2.2
    assert ds.parse("Document0,Document0", **ctx).valid is False  # duplicate ids
    assert ds.parse("Document12", **ctx).valid is False  # out of range
    assert ds.parse("Documents 0 and 4 help.", **ctx).valid is False
    assert ds.constraint({"docs": DOCS}) == ("Document", ",", *map(str, range(10)))  # Eq. 5
    ask = ds.build(question="q", docs=DOCS)[-1]["content"]
    assert "Document0,Document4,Document6" in ask and "0 to 9" in ask


def test_mao_generator_reads_bold_answers():
    ag = mao("AG")
    assert t(ag.parse("**non ferrous metal**")) == ("non ferrous metal", True)  # Table 12
    assert t(ag.parse("The answer is **Bhupendranath Dutt**.")) == ("Bhupendranath Dutt", True)
    assert t(ag.parse("<answer>Columbia University</answer>")) == ("Columbia University", True)
    assert t(ag.parse("Columbia University")) == ("Columbia University", False)
    assert ag.parse("****").valid is False
    with_docs = ag.build(question="q?", docs=DOCS[:2])
    assert [m["role"] for m in with_docs] == ["system", "assistant", "user", "assistant", "user"]
    assert "**answer**" in with_docs[-1]["content"]


def test_mao_summariser_reads_any_plain_answer():
    as_ = mao("AS")
    assert t(as_.parse("New York City")) == ("New York City", True)  # no format in Table 13
    assert t(as_.parse("**Badly Drawn Boy**")) == ("Badly Drawn Boy", True)
    assert as_.parse("").valid is False


# ------------------------------------------------------------------ JADE (App. E.6)

def test_jade_generator_says_it_does_not_know():
    ag = role_for("AG", "paper", "jade")
    shown = "\n".join(m["content"] for m in ag.build(question="q?", docs=DOCS[:2]))
    assert "I don't know" in shown and "Document1: (T1) text 1" in shown
    assert "best guess" not in shown
    assert t(ag.parse("<answer>I don't know</answer>")) == ("I don't know", True)
    assert t(ag.parse("<answer>1982</answer>")) == ("1982", True)  # Case 2
    # JADE's DS writes <id>Document0, Document1, ...</id> (Case 1): the default parser reads it
    ds = role_for("DS", "paper", "jade")
    assert t(ds.parse("<id>Document0, Document1, Document2, Document4</id>", n_docs=5)) == (
        [0, 1, 2, 4], True)


# ------------------------------------------------------------------ M-ASK (App. C.3)

def test_mask_summary_keeps_no_useful_information_as_text():
    s = role_for("mask.summary", "paper", "m-ask")
    assert t(s.parse("<evidence>No useful information</evidence>")) == (
        "No useful information", True)
    assert t(s.parse("<evidence>Puebla A.C. played in 1943.</evidence>")) == (
        "Puebla A.C. played in 1943.", True)
    assert s.parse("Puebla.").valid is False
    shown = "\n".join(m["content"] for m in s.build(question="orig?", query="sub?", docs=DOCS[:1]))
    assert "sub?" in shown and "orig?" not in shown
    # the default profile reads "No useful information" as empty evidence
    assert get_role("mask.summary").parse("<evidence>No useful information</evidence>").value == ""
