"""Answer roles: the generator (AG, with or without documents) and the summarizer (AS),
which answers a decomposed question from its solved (sub-question, answer) pairs."""

from __future__ import annotations

from collections.abc import Sequence

from marag.roles.base import Messages, Parsed, Role
from marag.roles.prompt import (
    DEFAULT_DOC_WORDS,
    chat,
    render_docs,
    render_pairs,
    rewrite_line,
)
from marag.roles.tags import find_first, first_line
from marag.types import Passage

_ASK = "Answer in a few words, inside <answer></answer>:"

_AG_DOCS = """Answer the question using the documents. Give only the answer, a few words \
long, inside <answer></answer>. If the documents do not say, give your best guess."""

_AG_NO_DOCS = """Answer the question from what you know. Give only the answer, a few words \
long, inside <answer></answer>."""

_AG_EX_DOCS = f"""Document0: (Mount Everest) Mount Everest is Earth's highest mountain above \
sea level, on the border of Nepal and China.
Document1: (K2) K2 is the second-highest mountain on Earth.
Question: What is the highest mountain on Earth?
{_ASK}"""

_AG_EX_NO_DOCS = "Question: What is the capital of France?\n" + _ASK

_AS = """A question was split into sub-questions that are already answered. Combine their \
answers to answer the original question. Give only the answer, a few words long, inside \
<answer></answer>."""

_AS_EX = f"""Original question: Which country is the director of the film Jaws from?
Solved sub-questions:
1. Who directed Jaws? -> Steven Spielberg
2. Which country is Steven Spielberg from? -> United States
{_ASK}"""


def build_ag(
    question: str, docs: Sequence[Passage] | None = None, max_words: int = DEFAULT_DOC_WORDS,
    rewrite: str | None = None,
) -> Messages:
    """``rewrite``: the search query QR wrote earlier in this round (JADE Algorithm 1 line 19:
    each solving agent's output joins the context of the agents after it)."""
    q = question.strip() + rewrite_line(rewrite)
    if docs:
        user = f"{render_docs(docs, max_words)}\nQuestion: {q}\n{_ASK}"
        return chat(_AG_DOCS, _AG_EX_DOCS, "<answer>Mount Everest</answer>", user)
    return chat(_AG_NO_DOCS, _AG_EX_NO_DOCS, "<answer>Paris</answer>", f"Question: {q}\n{_ASK}")



def build_as(question: str, pairs: Sequence[Sequence[str]]) -> Messages:
    user = (
        f"Original question: {question.strip()}\nSolved sub-questions:\n"
        f"{render_pairs(pairs)}\n{_ASK}"
    )
    return chat(_AS, _AS_EX, "<answer>United States</answer>", user)


def parse_tagged_answer(text: str, tag: str) -> Parsed:
    """The body of ``<tag>`` (of an unclosed one, its first line); without the tag, the first
    line of text, marked invalid."""
    if not isinstance(text, str):
        return Parsed("", False, "completion is not text")
    element = find_first(text, tag)
    if element is None:
        fallback = first_line(text)
        return Parsed(fallback, False, f"no <{tag}> tag" if fallback else "empty completion")
    # an unclosed answer runs to the end of the reply, where small models go on to write
    # another "Question: ..." turn: its first line is the answer
    body = element.body if element.closed else first_line(element.body)
    answer = " ".join(body.split())
    if not answer:
        return Parsed("", False, f"empty <{tag}>")
    return Parsed(answer)


def parse_answer(text: str, **_: object) -> Parsed:
    return parse_tagged_answer(text, "answer")


AG = Role(
    name="AG",
    build=build_ag,
    parse=parse_answer,
    max_tokens=32,
    stop=("</answer>",),
)

AS = Role(
    name="AS",
    build=build_as,
    parse=parse_answer,
    max_tokens=32,
    stop=("</answer>",),
)
