"""Decomposition roles: serial (QDS) and parallel (QDP) for the planner family, and the
MMOA-RAG query rewriter (``mmoa.QR``), which always splits into one to four queries.

All three answer with numbered tags ``<q1>...</q1><q2>...</q2>``.
"""

from __future__ import annotations

from marag.roles.base import Messages, Parsed, Role
from marag.roles.prompt import chat
from marag.roles.tags import numbered, scan

MAX_ITEMS = 4

_QDS = """Split the question into a short chain of sub-questions, where a later one needs \
the answer of an earlier one. Use at most {n} sub-questions. Put each in numbered tags: \
<q1></q1>, <q2></q2>, ..."""
_QDS_IN = "Question: In which city was the director of Jaws born?\nSub-questions:"
_QDS_OUT = "<q1>Who directed the film Jaws?</q1>\n<q2>In which city was this director born?</q2>"

_QDP = """Split the question into independent sub-questions that can each be searched on \
their own. Use at most {n} sub-questions. Put each in numbered tags: <q1></q1>, <q2></q2>, ..."""
_QDP_IN = "Question: Are Lyon and Porto in the same country?\nSub-questions:"
_QDP_OUT = "<q1>Which country is Lyon in?</q1>\n<q2>Which country is Porto in?</q2>"

_MMOA = """Write search queries that together find what is needed to answer the question: \
one query for a simple question, up to four for a complex one. Put each in numbered tags: \
<q1></q1>, <q2></q2>, ..."""
_MMOA_IN = "Question: Who was born first, Ada Lovelace or Charles Babbage?\nQueries:"
_MMOA_OUT = "<q1>Ada Lovelace birth date</q1>\n<q2>Charles Babbage birth date</q2>"


def build_qds(question: str, max_items: int = MAX_ITEMS) -> Messages:
    user = f"Question: {question.strip()}\nSub-questions:"
    return chat(_QDS.format(n=max_items), _QDS_IN, _QDS_OUT, user)


def build_qdp(question: str, max_items: int = MAX_ITEMS) -> Messages:
    user = f"Question: {question.strip()}\nSub-questions:"
    return chat(_QDP.format(n=max_items), _QDP_IN, _QDP_OUT, user)


def build_mmoa(question: str) -> Messages:
    return chat(_MMOA, _MMOA_IN, _MMOA_OUT, f"Question: {question.strip()}\nQueries:")


def extract_items(text: str) -> tuple[list[str], list[str]]:
    """Non-empty, distinct ``<qN>`` bodies in order, and the problems met on the way."""
    if not isinstance(text, str):
        return [], ["completion is not text"]
    items: list[str] = []
    problems: list[str] = []
    seen: set[str] = set()
    for _, element in numbered(scan(text), "q"):
        item = " ".join(element.body.split())
        if not item:
            problems.append("empty sub-question")
        elif item.casefold() in seen:
            problems.append("duplicate sub-question")
        else:
            seen.add(item.casefold())
            items.append(item)
    return items, problems


def parse_split(text: str, max_items: int = MAX_ITEMS, **_: object) -> Parsed:
    """QDS/QDP: 1..max_items sub-questions; extra ones are dropped and the step is invalid."""
    items, problems = extract_items(text)
    if not items:
        return Parsed([], False, problems[0] if problems else "no <qN> sub-question tags")
    if len(items) > max_items:
        return Parsed(items[:max_items], False, f"more than {max_items} sub-questions")
    if problems:
        return Parsed(items, False, problems[0])
    return Parsed(items)


def parse_mmoa(text: str, max_items: int = MAX_ITEMS, **_: object) -> Parsed:
    """mmoa.QR: every query is kept (the MMOA-RAG reward penalises more than ``max_items``)."""
    items, problems = extract_items(text)
    if not items:
        return Parsed([], False, problems[0] if problems else "no <qN> query tags")
    if len(items) > max_items:
        return Parsed(items, False, f"more than {max_items} sub-questions")
    if problems:
        return Parsed(items, False, problems[0])
    return Parsed(items)


def split_context(max_items: int = MAX_ITEMS, **_: object) -> dict[str, object]:
    return {"max_items": max_items}


QDS = Role(
    name="QDS",
    build=build_qds,
    parse=parse_split,
    max_tokens=128,
    parse_context=split_context,
)

QDP = Role(
    name="QDP",
    build=build_qdp,
    parse=parse_split,
    max_tokens=128,
    parse_context=split_context,
)

MMOA_QR = Role(
    name="mmoa.QR",
    build=build_mmoa,
    parse=parse_mmoa,
    max_tokens=128,
)
