"""The query rewriter (QR): one short, self-contained search query for a question.

Given the solved earlier sub-questions of a serial decomposition, it also resolves
references such as "this actor" to the entity an earlier answer named; it is then also shown
the original question the sub-question came from (JADE Eq. 3: the current sub-question, the
solved pairs and the original question).
"""

from __future__ import annotations

from collections.abc import Sequence

from marag.roles.base import Messages, Parsed, Role
from marag.roles.prompt import chat, render_pairs
from marag.roles.tags import find_first, first_line

_SYSTEM = """Rewrite the question as one short search query. Keep every name, date and \
key term. If earlier questions were already answered, replace words like "this", "he" or \
"the film" with the entity their answers name. Reply inside <query></query>."""

_EXAMPLE_IN = """Already answered:
1. Who directed the film Jaws? -> Steven Spielberg
Question: In which year was this director born?
Query:"""
_EXAMPLE_OUT = "<query>Steven Spielberg birth year</query>"


def build(question: str, context: Sequence[Sequence[str]] = (),
          original: str | None = None) -> Messages:
    head = f"Original question: {original.strip()}\n" if original else ""
    user = (f"{head}Already answered:\n{render_pairs(context)}\n"
            f"Question: {question.strip()}\nQuery:")
    return chat(_SYSTEM, _EXAMPLE_IN, _EXAMPLE_OUT, user)


def parse(text: str, question: str = "", **_: object) -> Parsed:
    """The ``<query>`` body; otherwise the first line of text, else ``question`` (invalid)."""
    if not isinstance(text, str):
        return Parsed(question.strip(), False, "completion is not text")
    element = find_first(text, "query")
    if element is not None:
        query = " ".join(element.body.split())
        if query:
            return Parsed(query)
        return Parsed(question.strip(), False, "empty <query>")
    fallback = first_line(text) or question.strip()
    return Parsed(fallback, False, "no <query> tag")


def parse_context(question: str = "", **_: object) -> dict[str, object]:
    return {"question": question}


ROLE = Role(
    name="QR",
    build=build,
    parse=parse,
    max_tokens=40,
    stop=("</query>",),
    parse_context=parse_context,
)
