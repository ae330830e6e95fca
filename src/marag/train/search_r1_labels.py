"""``marag sft --recipe answers --method search-r1``: a warm start that teaches Search-R1's
tags to a model too small to follow them (issue 37).

For each training question the label is a two-call trajectory in exactly the text the
``search-r1`` workflow builds at rollout: the first call thinks briefly and searches for the
question itself; the workflow's ``<information>`` block (the retriever's top
``method.search_top_k`` passages for that query, in the paper's layout) follows; the second
call thinks briefly and answers with a golden answer. Under ``sft.answer_evidence: docs``
(the default) only questions whose answer those passages support are kept (the ``answers``
recipe's rule: the answer's words occur in them, or yes/no, or an option the question names),
so the label never teaches answering from memory. Each call is one example (the second's
prompt holds the first call and the observation as the open assistant turn it continues;
the observation is prompt, never a target, as in ``marag train``'s masking).

This is marag's warm start, not part of Search-R1 (which trains from the base or instruct
model with RL alone); the two short thoughts are fixed marag sentences, so the recipe teaches
the protocol and a first query, not reasoning.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from marag.config import Config
from marag.roles.search_r1 import NAME, build, information, parse
from marag.types import Question

THINK_SEARCH = "I need outside knowledge to answer this, so I will search for it."
THINK_ANSWER = "The information above answers the question."


def first_call(question: str) -> str:
    """The first call's text: a short thought and a search for the question itself."""
    return f"<think> {THINK_SEARCH} </think>\n<search> {' '.join(question.split())} </search>"


def answer_call(answer: str) -> str:
    return f"<think> {THINK_ANSWER} </think>\n<answer> {answer} </answer>"


def _reads(text: str, want: tuple[str, str]) -> bool:
    p = parse(text)
    return p.valid and (p.value["action"], p.value["content"]) == want


async def examples_search_r1(questions: Sequence[Question], retriever: Any, config: Config,
                             tally: dict[str, int] | None = None) -> list[Any]:
    """Two examples (search call, answer call) per kept question; ``tally`` counts the kept
    questions and why the others were dropped."""
    from marag.train.sft import Example, clean_golds, labelled_answer

    m = config.method
    if config.sft.irrelevant_share:
        raise ValueError("sft.irrelevant_share (RetRobust's mix) labels an AG reader; "
                         "search-r1's labels show the top search_top_k passages: set it to 0")
    queries = [" ".join(q.question.split()) for q in questions]
    hits = await retriever.search(queries, m.search_top_k)
    counts = {"kept": 0, "no answer": 0, "no documents": 0, "unsupported": 0,
              "unreadable": 0}
    out: list[Any] = []
    for q, h in zip(questions, hits, strict=True):
        golds = clean_golds(q)
        if not golds:
            counts["no answer"] += 1
            continue
        docs = list(h.passages[:m.search_top_k])
        if not docs:
            counts["no documents"] += 1
            continue
        observation = information(docs)
        answer = labelled_answer(q.question, golds, observation, config.sft.answer_evidence,
                                 counts)
        if answer is None:
            continue
        search, final = first_call(q.question), answer_call(answer)
        # a question or answer holding the tags themselves (or a blank question) would teach
        # a call the parser reads otherwise: such a question is counted and skipped
        if not all(_reads(text, want) for text, want in (
                (search, ("search", " ".join(q.question.split()))),
                (final, ("answer", answer)))):
            counts["unreadable"] += 1
            continue
        counts["kept"] += 1
        out.append(Example(NAME, build(q.question), search))
        out.append(Example(NAME, build(q.question, search + observation), final))
    if tally is not None:
        tally.update(counts)
    return out
