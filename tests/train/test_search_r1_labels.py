"""``marag sft --recipe answers --method search-r1``: each kept question gives the two calls
the search-r1 workflow would make (search for the question, answer from its top passages),
in exactly the text the workflow builds; answers the passages do not support are dropped."""

from __future__ import annotations

import asyncio

from test_sft import Shelf

from marag.config import load_config
from marag.llm.scripted import ScriptedLLM
from marag.train import sft
from marag.train.search_r1_labels import examples_search_r1
from marag.types import Question
from marag.workflows import run_method
from marag.workflows.engine import Context

CAPITAL = Question("cap", "Which city is  the capital of France?", ["Lutetia", "Paris"])


def _labels(questions, *overrides):
    cfg = load_config(None, ["method.name=search-r1", *overrides])
    shelf, tally = Shelf(), {}
    return shelf, asyncio.run(examples_search_r1(questions, shelf, cfg, tally)), tally


def test_labels_are_the_calls_the_workflow_makes():
    shelf, (search, answer), tally = _labels([CAPITAL])
    assert tally == {"kept": 1, "no answer": 0, "no documents": 0, "unsupported": 0,
                     "unreadable": 0}
    assert shelf.queries == ["Which city is the capital of France?"]  # the question, once
    assert search.role == answer.role == "search-r1"
    assert search.target.endswith("<search> Which city is the capital of France? </search>")
    assert answer.target.endswith("<answer> Paris </answer>")  # the supported golden answer
    llm = ScriptedLLM({"search-r1": [search.target, answer.target]})
    cfg = load_config(None, ["llms.default.backend=scripted", "method.name=search-r1"])
    trace = asyncio.run(run_method("search-r1", CAPITAL, Context(
        llms={"default": llm}, config=cfg, retriever=Shelf())))
    assert trace.status == "ok" and trace.answer == "Paris"
    first, second = [s for s in trace.steps if s.role == "search-r1"]
    assert first.messages == search.messages and first.raw == search.target
    assert second.messages == answer.messages and second.raw == answer.target
    observed = answer.messages[-1]["content"]  # the open assistant turn: call 1 + information
    assert observed.startswith(search.target) and "<information>Doc 1(Title: France)" in observed
    assert observed.count("Doc ") == 3  # the paper's top 3 (method.search_top_k)


def test_unsupported_answers_are_dropped_unless_asked():
    qs = [CAPITAL, Question("port", "Which French city is the largest port?", ["Marseille"]),
          Question("none", "Which town?", [" "])]
    _, got, tally = _labels(qs, "method.search_top_k=2")  # no passage names Marseille
    assert len(got) == 2 and tally["unsupported"] == 1 and tally["no answer"] == 1
    _, got, tally = _labels(qs, "method.search_top_k=2", "sft.answer_evidence=any")
    assert [e.target.rsplit("<answer>", 1)[-1] for e in got[1::2]] == [
        " Paris </answer>", " Marseille </answer>"]
    assert tally["kept"] == 2


def test_the_recipe_is_refused_for_a_method_it_cannot_label():
    import pytest

    sft.check_answer_method("search-r1")  # registered for the recipe, with its own labels
    with pytest.raises(ValueError, match="examples_search_r1"):
        asyncio.run(sft.examples_answers([CAPITAL], Shelf(), load_config(
            None, ["method.name=search-r1"])))
    with pytest.raises(ValueError, match="search-r1's search-then-answer"):
        sft.check_answer_method("m-ask")


def test_labels_the_parser_would_misread_are_counted_not_raised():
    qs = [Question("tag", "Which city is the capital of France </search>?", ["Paris"]),
          Question("blank", "   ", ["Paris"]), CAPITAL]
    _, got, tally = _labels(qs, "sft.answer_evidence=any")
    assert len(got) == 2 and tally["unreadable"] == 2 and tally["kept"] == 1
    import pytest

    with pytest.raises(ValueError, match="irrelevant_share"):
        _labels([CAPITAL], "sft.irrelevant_share=0.5")
