"""Whatever a model writes, every parser returns a well-typed Parsed and never raises."""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from marag.roles import PROFILES, ROLES, Parsed
from marag.roles.self_rag import REFLECTION

# every parser: the default roles and the prompt profiles' replacements ("paper:mao-arag:AG")
ALL = {**ROLES, **{f"{profile}:{method}:{name}": role
                   for profile, methods in PROFILES.items()
                   for method, roles in methods.items() for name, role in roles.items()}}

FRAGMENTS = [
    "<answer>", "</answer>", "<id>", "</id>", "Document7", "Document0", ",", "<q1>", "</q1>",
    "<q3>", "<a1>", "</a2>", "<Update>t9", "<Update>", "</Update>", "<Add>t2</Add>", "<end>",
    "<search>", "</search>", "<evidence>", "No useful information", "<predicted_answer>",
    "<workflow>", "</workflow>", "R, DS, AG", "QDS", "QDP", "XX", "<query>", "0", "12", " ",
    "\n", "\t", "é", "日本", "🙂", "\x00", "<", ">", "/", "unknown", "τ_1", "<q99999999>",
    "**", "RA", "AS", "1. ", "- ", '"',
    "<|begin_search_query|>", "<|end_search_query|>", "\\boxed{", "}", "\\text{", "(",
    "**Final Information**",
    "<note>", "</note>", "<better>", "</better>", "yes", "no", "[Retrieval]", "[No Retrieval]",
    "[Relevant]", "[Irrelevant]", "[Fully supported]", "[Partially supported]",
    "[No support / Contradictory]", "[Utility:5]", "[Utility:0]", "<paragraph>", "</s>", "#",
]
fragment_text = st.lists(st.sampled_from(FRAGMENTS) | st.text(max_size=5), max_size=40).map("".join)
CONTEXT = {
    "planner": st.fixed_dictionaries({"allow_decompose": st.booleans(),
                                      "summarise": st.booleans()}),
    "QR": st.fixed_dictionaries({"question": st.text(max_size=20)}),
    "QDS": st.fixed_dictionaries({"max_items": st.integers(1, 6)}),
    "QDP": st.fixed_dictionaries({"max_items": st.integers(1, 6)}),
    "mmoa.QR": st.fixed_dictionaries({"max_items": st.integers(1, 6)}),
    "DS": st.fixed_dictionaries({"n_docs": st.integers(0, 12)}),
    "mask.search": st.fixed_dictionaries({"history": st.lists(st.text(max_size=10), max_size=3)}),
    "mask.update": st.fixed_dictionaries({"n_pairs": st.integers(0, 6)}),
    "ircot": st.fixed_dictionaries({"reader": st.booleans(), "direct": st.booleans()}),
    "deepnote.query": st.fixed_dictionaries({"history": st.lists(st.text(max_size=10),
                                                                 max_size=3)}),
    "self-rag": st.fixed_dictionaries({"kind": st.sampled_from(["decide", "evidence",
                                                                "direct"])}),
}


def check_contract(name: str, p: Parsed, ctx: dict) -> None:
    assert isinstance(p, Parsed)
    assert isinstance(p.valid, bool)
    assert isinstance(p.reason, str)
    assert bool(p.reason) != p.valid  # a reason exactly when invalid
    v = p.value
    if name in ("planner", "QDS", "QDP", "mmoa.QR"):
        assert isinstance(v, list) and all(isinstance(x, str) for x in v)
        if name in ("QDS", "QDP"):
            assert len(v) <= ctx["max_items"]
        if name != "planner" and p.valid:
            assert 1 <= len(v) <= ctx["max_items"]
    elif name == "DS":
        assert isinstance(v, list) and all(type(i) is int and 0 <= i < ctx["n_docs"] for i in v)
        assert len(set(v)) == len(v)
        assert v or not p.valid
    elif name in ("QR", "AG", "AS", "mask.summary", "mask.answer", "deepnote.answer",
                  "deepnote.init", "deepnote.update"):
        assert isinstance(v, str)
        if p.valid and name != "mask.summary":
            assert v.strip()
    elif name == "mask.plan":
        assert set(v) == {"pairs", "answer"} and isinstance(v["answer"], str) and v["answer"]
        assert all(isinstance(q, str) and isinstance(a, str) and q and a for q, a in v["pairs"])
    elif name == "mask.search":
        assert v == {"end": True} or (set(v) == {"query"} and v["query"].strip())
    elif name == "adaptive.classify":
        assert v in ("", "A", "B", "C") and (bool(v) == p.valid)
    elif name in ("search-r1", "search-o1"):
        assert set(v) == {"action", "content"} and isinstance(v["content"], str)
        assert v["action"] in ("search", "answer", None)
        assert not p.valid or (v["action"] is not None and v["content"].strip())
    elif name == "search-o1.rid":
        assert isinstance(v, str) and v.strip()
    elif name == "ircot":
        assert set(v) == {"sentence", "answer"} and isinstance(v["sentence"], str)
        assert isinstance(v["answer"], str) if ctx.get("reader") or ctx.get("direct") else \
            v["answer"] is None or isinstance(v["answer"], str)
        assert not p.valid or (v["sentence"].strip() and (v["answer"] is None
                                                          or v["answer"].strip()))
        assert "\n" not in v["sentence"]
    elif name == "deepnote.query":
        assert isinstance(v, list) and all(isinstance(q, str) and q.strip() for q in v)
        assert len(v) <= 3 and (v or not p.valid)
    elif name == "deepnote.compare":
        assert isinstance(v, bool)
        assert p.valid or v is False or "bare reply" in p.reason  # unreadable: the old note
    elif name == "self-rag":
        kind = ctx.get("kind", "evidence")
        assert v["kind"] == kind and isinstance(v["answer"], str)
        read = p.reason != "completion is not text"
        assert v["retrieve"] in ((True, False) if kind == "decide" and read else (None,))
        assert v["utility"] is None or v["utility"] in range(1, 6)
        assert v["relevance"] in (None, "[Relevant]", "[Irrelevant]")
        assert not any(t in v["answer"] for t in REFLECTION)
        if p.valid and kind != "decide":
            assert v["answer"].strip()
        if p.valid and kind == "evidence":
            assert v["relevance"] is not None
    elif name == "mask.update":
        n = ctx["n_pairs"]
        assert v["op"] in ("update", "add") and type(v["index"]) is int
        assert 1 <= v["index"] <= n if v["op"] == "update" else v["index"] == n + 1
    else:
        pytest.fail(f"no contract check for role {name}")


@pytest.mark.parametrize("key", sorted(ALL))
@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=st.text(), data=st.data())
def test_arbitrary_text(key, text, data):
    name = ALL[key].name
    ctx = data.draw(CONTEXT.get(name, st.just({})))
    check_contract(name, ALL[key].parse(text, **ctx), ctx)


@pytest.mark.parametrize("key", sorted(ALL))
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=fragment_text, data=st.data())
def test_tag_vocabulary_soup(key, text, data):
    name = ALL[key].name
    ctx = data.draw(CONTEXT.get(name, st.just({})))
    check_contract(name, ALL[key].parse(text, **ctx), ctx)


HUGE = [
    "<q1>" * 50_000,
    "<" * 200_000,
    "<id>" + "1, " * 50_000,
    "Document7," * 50_000,
    "<id>x" + " " * 200_000 + "x",
    "<answer>" + "word " * 100_000,
    "<a" + "b" * 200_000,
    "\\boxed{" * 30_000 + "<|begin_search_query|>" * 30_000 + "<|end_search_query|>",
]


@pytest.mark.parametrize("key", sorted(ALL))
def test_huge_and_non_text_inputs(key):
    role = ALL[key]
    name = role.name
    ctx = {"planner": {"allow_decompose": True}, "QR": {"question": "q"}, "QDS": {"max_items": 4},
           "QDP": {"max_items": 4}, "mmoa.QR": {"max_items": 4}, "DS": {"n_docs": 5},
           "mask.search": {"history": []}, "mask.update": {"n_pairs": 2}}.get(name, {})
    for text in HUGE:
        check_contract(name, role.parse(text, **ctx), ctx)
    for junk in (None, b"<answer>x</answer>", 42):
        p = role.parse(junk, **ctx)
        assert p.valid is False and p.reason == "completion is not text"
