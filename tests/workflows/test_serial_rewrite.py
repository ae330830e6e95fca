"""method.serial_rewrite: guarded keeps a serial sub-question and uses QR's rewrite only as
its search query, and only when the rewrite asks about the sub-question (the probe of
docs/results/qwen-runs/crossfit/probe-decomposition/ found Qwen2.5-Coder-0.5B replying with
guesses such as its prompt example's "Steven Spielberg")."""

from __future__ import annotations

import pytest
from tests.workflows.test_fixed_plans import PARTS, Q

from marag.config import ConfigError, load_config
from marag.llm.scripted import ScriptedLLM
from marag.workflows import run_method
from marag.workflows.planner import guarded_query

# part 1's rewrite is a query; part 2's is a guess (the earlier answer)
REWRITES = ["<query>Arthur's Magazine start date</query>", "<query>1844</query>"]


def _team(**rules: object) -> ScriptedLLM:
    """A scripted team that splits Q serially into PARTS, rewrites them with REWRITES and
    answers each part and the whole; ``rules`` adds (or replaces) roles' replies."""
    return ScriptedLLM({
        "QDS": "".join(f"<q{i}>{q}</q{i}>" for i, q in enumerate(PARTS, 1)),
        "QR": REWRITES,
        "AG": ["<answer>1844</answer>", "<answer>1989</answer>"],
        "AS": "<answer>Arthur's Magazine</answer>",
        **rules,
    })


def _fixed(*more: str) -> tuple[str, ...]:
    return ("method.root_plan=[QDS]", "method.sub_plan=[R, AG]", *more)


@pytest.mark.parametrize(("question", "rewrite", "answers", "query"), [
    # the probe's replies (fold-A questions): a guess, an answer, the prompt's example
    ("Who directed the film A Dream of Happiness?", "Steven Spielberg", [], None),
    ("Where was this father born?", "Prince Peter of Salerno birth year",
     ["Prince Peter of Salerno"], "Where was this father born? Prince Peter of Salerno"),
    ("Do both films have the directors who are from the same country?", "no", [], None),
    # a query that keeps what the sub-question asks is used
    ("Which city is Yingkou?", "Yingkou city", [], "Yingkou city"),
    ("In which year was this director born?", "Steven Spielberg year of birth",
     ["Steven Spielberg"], "Steven Spielberg year of birth"),
    # an empty or invalid rewrite: the sub-question with what is known
    ("When was this magazine started?", "", ["Arthur's Magazine", " "],
     "When was this magazine started? Arthur's Magazine"),
])
def test_guarded_query(question, rewrite, answers, query):
    assert guarded_query(question, rewrite, answers) == query


async def test_guarded_serial_parts_keep_their_questions_and_search_with_the_guarded_query(
        hotpot_retriever, ctx_for):
    t = await run_method("jade", Q, ctx_for(_team(), hotpot_retriever,
                                            *_fixed("method.serial_rewrite=guarded")))
    assert t.status == "ok" and t.answer == "Arthur's Magazine"
    assert [n.question for n in t.nodes[1:]] == PARTS
    assert [n.query for n in t.nodes[1:]] == ["Arthur's Magazine start date",
                                              "When was First for Women started? 1844"]
    assert [s.raw for s in t.steps if s.role == "R"] == [n.query for n in t.nodes[1:]]
    # AG reads the part's own question with the query beside it
    ag = [s.messages[-1]["content"] for s in t.steps if s.role == "AG"]
    assert "Question: When was First for Women started?" in ag[1]
    assert "Rewritten as: When was First for Women started? 1844" in ag[1]
    # the refused rewrite is recorded invalid (no SFT label) and noted; the accepted one not
    assert [(s.valid, s.reason) for s in t.steps if s.role == "QR"] == [
        (True, ""), (False, "rewrite shares no content word with the sub-question")]
    assert [n for n in t.notes if "serial rewrite" in n] == [
        ("node 2: serial rewrite '1844' not used as the query (shares no content word with "
         "the sub-question)")]
    # AS sees the parts as they were asked
    assert "When was First for Women started? -> 1989" in next(
        s for s in t.steps if s.role == "AS").messages[-1]["content"]


async def test_a_guarded_parts_own_qr_rewrites_its_query(hotpot_retriever, ctx_for):
    # in call order: part 1's serial rewrite and own QR, then part 2's
    llm = _team(QR=[REWRITES[0], "<query>Arthur's Magazine first issue</query>",
                    REWRITES[1], "<query>First for Women 1844 launch</query>"])
    t = await run_method("jade", Q, ctx_for(llm, hotpot_retriever, "method.root_plan=[QDS]",
                                            "method.sub_plan=[QR, R, AG]",
                                            "method.serial_rewrite=guarded"))
    qr = [s for s in t.steps if s.role == "QR"]
    # the serial rewrite, then the part's own QR, which is shown the guarded query
    assert [s.node_id for s in qr] == [1, 1, 2, 2]
    assert "Question: When was First for Women started? 1844" in qr[3].messages[-1]["content"]
    assert [s.raw for s in t.steps if s.role == "R"] == [
        "Arthur's Magazine first issue", "First for Women 1844 launch"]


async def test_mao_arag_guards_the_later_parts_only(hotpot_retriever, ctx_for):
    llm = _team(QR=["<query>1844</query>"])
    t = await run_method("mao-arag", Q, ctx_for(llm, hotpot_retriever,
                                                *_fixed("method.serial_rewrite=guarded")))
    assert [s.node_id for s in t.steps if s.role == "QR"] == [2]
    assert [n.query for n in t.nodes[1:]] == [None, "When was First for Women started? 1844"]
    assert [s.raw for s in t.steps if s.role == "R"] == [
        PARTS[0], "When was First for Women started? 1844"]


async def test_replace_is_the_default_and_jades_own(hotpot_retriever, ctx_for):
    t = await run_method("jade", Q, ctx_for(_team(), hotpot_retriever, *_fixed()))
    assert [n.question for n in t.nodes[1:]] == ["Arthur's Magazine start date", "1844"]
    assert all(n.query is None for n in t.nodes)
    assert all(s.valid for s in t.steps if s.role == "QR")


def test_serial_rewrite_is_refused_for_a_method_without_a_planner():
    assert load_config(None, ["method.serial_rewrite=guarded"]).method.serial_rewrite == "guarded"
    with pytest.raises(ConfigError, match="method.serial_rewrite is read by the planner"):
        load_config(None, ["method.name=vanilla", "method.serial_rewrite=guarded"])
    with pytest.raises(ConfigError, match="serial_rewrite"):
        load_config(None, ["method.serial_rewrite=keep"])
