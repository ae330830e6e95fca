"""The ``paper`` profile of ``mao-arag``: MAO-ARAG's executors in the formats of its App. C
(Tables 8-13), instructions in marag's words.

* QDS / QDP: one sub-question per line, unnumbered (``<qN>`` tags are read too);
* QR: the rewritten query as plain text (a ``<query>`` tag is read too);
* DS: ``Document0,Document4`` (:mod:`marag.roles.paper_select`);
* AG: the answer in bold, ``**answer**`` (an ``<answer>`` tag is read too);
* AS: the paper gives no format; bold, a tag or a plain first line are all read;
* planner: the paper shows no planner prompt; its case studies write plans as bare codes
  ("RA, AG", "QDP", "AS"), so the prompt names the retriever RA and a plan is read with or
  without ``<workflow>`` tags.

The executors' prompts follow the papers' shape: a system instruction, the assistant's short
acknowledgement, then the input (AG and DS: the input, an acknowledgement, then the request).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from marag.config import ROLE_CODES, plan_problem
from marag.roles import decompose, paper_select, planner, rewrite
from marag.roles.base import Messages, Parsed, Role
from marag.roles.prompt import DEFAULT_DOC_WORDS, render_docs, render_pairs, rewrite_line
from marag.roles.tags import find_first, first_line, numbered, scan, strip_tags
from marag.types import Passage

_BOLD = re.compile(r"\*\*(.+?)\*\*", re.DOTALL)
# Line prefixes a model adds although told not to number: "1.", "2)", "-", "*", "Sub-question 1:"
_ITEM_PREFIX = re.compile(r"^\s*(?:(?:sub-?questions?\s*)?\d{1,3}\s*[.):]|[-*\u2022])\s*",
                          re.IGNORECASE)
_PLAN_WORDS = re.compile(r"[A-Za-z]+")


def _convo(system: str, ack: str, user: str) -> Messages:
    return [{"role": "system", "content": system}, {"role": "assistant", "content": ack},
            {"role": "user", "content": user}]


# ----------------------------------------------------------------------------- planner

_PLANNER = """You plan how a question gets answered, by choosing agents:
QR = rewrite the question into a clear search query
RA = retrieve candidate documents for the question
DS = keep the candidate documents that help
AG = answer the question (from documents when retrieved)
QDS = split into sub-questions that depend on each other, answered in order
QDP = split into independent sub-questions
Write either QDS alone, QDP alone, or some of QR, RA, DS, AG in that order ending with AG, \
e.g. <workflow>RA, AG</workflow>."""
_PLANNER_FLAT = """You plan how a question gets answered, by choosing agents:
QR = rewrite the question into a clear search query
RA = retrieve candidate documents for the question
DS = keep the candidate documents that help
AG = answer the question (from documents when retrieved)
Write some of QR, RA, DS, AG in that order ending with AG, e.g. <workflow>RA, AG</workflow>."""
_PLANNER_SOLVED = """You plan how a question gets answered. Its sub-questions have all been \
answered; the agent left is AS, which answers the question from them. Write \
<workflow>AS</workflow>."""


def build_planner(question: str, allow_decompose: bool = True,
                  pairs: Sequence[Sequence[str]] | None = None) -> Messages:
    q = question.strip()
    if pairs is not None:
        user = f"Question: {q}\nAnswered sub-questions:\n{render_pairs(pairs)}"
        return [{"role": "system", "content": _PLANNER_SOLVED},
                {"role": "user", "content": user}]
    system = _PLANNER if allow_decompose else _PLANNER_FLAT
    return [{"role": "system", "content": system}, {"role": "user", "content": f"Question: {q}"}]


def parse_planner(text: str, allow_decompose: bool = True, summarise: bool = False,
                  **_: object) -> Parsed:
    """A ``<workflow>`` plan, or a bare plan such as ``RA, AG`` when the reply is nothing but
    codes and separators."""
    if isinstance(text, str) and find_first(text, "workflow") is None:
        words = _PLAN_WORDS.findall(text)
        known = {*ROLE_CODES, *planner.ALIASES}
        if words and all(w.upper() in known for w in words):
            codes = planner.read_codes(text)
            reason = plan_problem(codes, allow_decompose, summarise)
            return Parsed(codes, not reason, reason)
    return planner.parse(text, allow_decompose, summarise)


# ----------------------------------------------------------------------------- QDS / QDP

_QDS = """You split a complex question into as few sub-questions as possible, each \
self-contained, specific and searchable, where later ones build on the answers of earlier \
ones. Only include sub-questions that are needed; never more than {n}."""
_QDP = """You split a question about several entities or places into independent \
sub-questions that can each be searched on its own, each specific and complete, none \
repeating another; never more than {n}."""
_QD_ACK = "Understood: I will write the sub-questions one per line."
_QD_ASK = ("Original question: {q}\nWrite the sub-questions, one per line, without numbers "
           "or any other text.")


def build_qds(question: str, max_items: int = decompose.MAX_ITEMS) -> Messages:
    return _convo(_QDS.format(n=max_items), _QD_ACK, _QD_ASK.format(q=question.strip()))


def build_qdp(question: str, max_items: int = decompose.MAX_ITEMS) -> Messages:
    return _convo(_QDP.format(n=max_items), _QD_ACK, _QD_ASK.format(q=question.strip()))


def parse_lines(text: str, max_items: int = decompose.MAX_ITEMS, **_: object) -> Parsed:
    """Sub-questions one per line (numbering or bullets stripped), or ``<qN>`` tags."""
    if not isinstance(text, str):
        return Parsed([], False, "completion is not text")
    if numbered(scan(text), "q"):
        return decompose.parse_split(text, max_items)
    items: list[str] = []
    seen: set[str] = set()
    problems: list[str] = []
    for line in text.splitlines():
        item = " ".join(_ITEM_PREFIX.sub("", strip_tags(line)).split())
        if not item:
            continue
        if item.casefold() in seen:
            problems.append("duplicate sub-question")
            continue
        seen.add(item.casefold())
        items.append(item)
    if not items:
        return Parsed([], False, "no sub-questions")
    if len(items) > max_items:
        return Parsed(items[:max_items], False, f"more than {max_items} sub-questions")
    return Parsed(items, not problems, problems[0] if problems else "")


# ----------------------------------------------------------------------------- QR

_QR = """You turn a wordy or detailed question into one short query that a search engine \
can use, keeping only what is needed to find the answer."""
_QR_ACK = "Understood: I will write one short query."


def build_qr(question: str, context: Sequence[Sequence[str]] = (),
             original: str | None = None) -> Messages:
    lines = []
    if original:
        lines.append(f"Original question: {original.strip()}")
    if context:
        lines.append(f"Already answered:\n{render_pairs(context)}")
    lines.append(f"Question: {question.strip()}")
    lines.append("Rewrite the question as one clear, specific query; replace words such as "
                 "\"this\" or \"he\" with what the answers above name. Write only the query.")
    return _convo(_QR, _QR_ACK, "\n".join(lines))


def parse_qr(text: str, question: str = "", **_: object) -> Parsed:
    """The query as plain text (its first line, quotes and bold marks removed), or a
    ``<query>`` tag's body."""
    if not isinstance(text, str):
        return Parsed(question.strip(), False, "completion is not text")
    if find_first(text, "query") is not None:
        return rewrite.parse(text, question)
    query = first_line(text).strip().strip("*\"'`").strip()
    if not query:
        return Parsed(question.strip(), False, "empty rewrite")
    return Parsed(" ".join(query.split()))


# ----------------------------------------------------------------------------- AG / AS

_AG = """You answer questions from the documents given with them. Do not make up facts you \
do not know; answer as accurately as you can."""
_AG_ACK = "Understood: give me the question and its documents."
_AG_GOT = "I have the question and the documents."
_AG_ASK = "Answer the question as briefly and accurately as the documents allow. Write only " \
          "the answer, in bold: **answer**"
_AG_NO_DOCS = "Answer the question as briefly and accurately as you can. Write only the " \
              "answer, in bold: **answer**"


def build_ag(question: str, docs: Sequence[Passage] | None = None,
             max_words: int = DEFAULT_DOC_WORDS, rewrite: str | None = None) -> Messages:
    q = question.strip() + rewrite_line(rewrite)
    if not docs:
        return _convo(_AG, _AG_ACK, f"Question: {q}\n{_AG_NO_DOCS}")
    return [
        {"role": "system", "content": _AG},
        {"role": "assistant", "content": _AG_ACK},
        {"role": "user", "content": f"Question: {q}\n{render_docs(docs, max_words)}"},
        {"role": "assistant", "content": _AG_GOT},
        {"role": "user", "content": f"Question: {q}\n{_AG_ASK}"},
    ]


def parse_bold(text: str, **_: object) -> Parsed:
    """The first ``**bold**`` span; an ``<answer>`` tag is read too; else the first line,
    invalid."""
    if not isinstance(text, str):
        return Parsed("", False, "completion is not text")
    m = _BOLD.search(text)
    if m is not None:
        answer = " ".join(m.group(1).split())
        return Parsed(answer) if answer else Parsed("", False, "empty **answer**")
    element = find_first(text, "answer")
    if element is not None and element.body.strip():
        return Parsed(" ".join(element.body.split()))
    fallback = first_line(text).strip("* ")
    return Parsed(fallback, False, "no **answer**" if fallback else "empty completion")


_AS = """You answer a question from the answers to the sub-questions it was split into. Do \
not make up facts; give the most accurate, concise answer the sub-answers support."""
_AS_ACK = "Understood: give me the question, its sub-questions and their answers."


def build_as(question: str, pairs: Sequence[Sequence[str]]) -> Messages:
    user = (f"Original question: {question.strip()}\nSub-questions and answers:\n"
            f"{render_pairs(pairs)}\nFrom these answers, answer the original question: "
            f"{question.strip()}")
    return _convo(_AS, _AS_ACK, user)


def parse_summary_answer(text: str, **_: object) -> Parsed:
    """Bold, tagged or plain: MAO-ARAG gives AS no output format, so a plain first line is
    valid."""
    p = parse_bold(text)
    if p.valid or not p.value:
        return p
    return Parsed(p.value)


ROLES: dict[str, Role] = {r.name: r for r in (
    Role("planner", build_planner, parse_planner, max_tokens=24, stop=("</workflow>",),
         parse_context=planner.parse_context),
    Role("QDS", build_qds, parse_lines, max_tokens=128, parse_context=decompose.split_context),
    Role("QDP", build_qdp, parse_lines, max_tokens=128, parse_context=decompose.split_context),
    Role("QR", build_qr, parse_qr, max_tokens=40, parse_context=rewrite.parse_context),
    paper_select.ROLE,
    Role("AG", build_ag, parse_bold, max_tokens=32),
    Role("AS", build_as, parse_summary_answer, max_tokens=32),
)}
