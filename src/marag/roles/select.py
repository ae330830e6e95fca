"""The document selector (DS): which retrieved documents help answer the question.

Accepted replies: ``<id>0, 2</id>``, ``<id>Document0, Document2</id>`` and MMOA-RAG's bare
``Document0,Document2``. Ids out of range, repeated ids, words that are not ids, or no ids at
all make the step invalid; the value then holds the in-range distinct ids that were found
and the workflow keeps every document.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from marag.roles.base import Messages, Parsed, Role
from marag.roles.prompt import DEFAULT_DOC_WORDS, chat, render_docs, rewrite_line
from marag.roles.tags import find_first
from marag.types import Passage

_SYSTEM = """Pick the documents that help answer the question. Reply with their numbers, \
separated by commas, inside <id></id>."""

_ASK = "Numbers of the useful documents, inside <id></id>:"
_EXAMPLE_IN = f"""Document0: (Mount Everest) Mount Everest is Earth's highest mountain above \
sea level.
Document1: (Pizza) Pizza is a dish from Italy.
Document2: (Himalayas) The Himalayas hold the highest peaks on Earth, Mount Everest among them.
Question: What is the highest mountain on Earth?
{_ASK}"""
_EXAMPLE_OUT = "<id>0, 2</id>"

# Inside <id> only ids, separators and these filler words may appear.
# No free-standing \s* before the digits: it made long blank runs quadratic to scan.
_ID = re.compile(r"(?:doc(?:ument)?\s*)?#?(\d{1,6})", re.IGNORECASE)
_FILLER = re.compile(r"\b(?:and|ids?|documents?|docs?)\b|[\s,;.&+/|#\[\]()]+", re.IGNORECASE)
_BARE = re.compile(r"document\s*(\d{1,6})", re.IGNORECASE)


def user_turn(question: str, docs: Sequence[Passage], max_words: int = DEFAULT_DOC_WORDS,
              rewrite: str | None = None) -> str:
    """The documents, the question and the request for ids. ``rewrite``: the query QR wrote
    earlier in this round (JADE Algorithm 1 line 19)."""
    q = question.strip() + rewrite_line(rewrite)
    return f"{render_docs(docs, max_words)}\nQuestion: {q}\n{_ASK}"


def build(question: str, docs: Sequence[Passage], max_words: int = DEFAULT_DOC_WORDS,
          rewrite: str | None = None) -> Messages:
    return chat(_SYSTEM, _EXAMPLE_IN, _EXAMPLE_OUT, user_turn(question, docs, max_words, rewrite))


def parse(text: str, n_docs: int = 0, **_: object) -> Parsed:
    if not isinstance(text, str):
        return Parsed([], False, "completion is not text")
    element = find_first(text, "id")
    if element is not None:
        found = [int(m.group(1)) for m in _ID.finditer(element.body)]
        leftover = _FILLER.sub(" ", _ID.sub(" ", element.body)).strip()
        problem = f"unexpected text in <id>: {leftover[:40]!r}" if leftover else ""
    else:
        found = [int(m.group(1)) for m in _BARE.finditer(text)]
        leftover = _FILLER.sub(" ", _BARE.sub(" ", text)).strip()
        # MMOA-RAG's tagless form counts only when the reply is nothing but document ids.
        problem = "no <id> tag" if leftover or not found else ""
    return _judge(found, n_docs, problem)


def _judge(found: list[int], n_docs: int, problem: str) -> Parsed:
    kept = list(dict.fromkeys(i for i in found if 0 <= i < n_docs))
    if problem:
        return Parsed(kept, False, problem)
    if not found:
        return Parsed(kept, False, "no document ids")
    out_of_range = sorted({i for i in found if not 0 <= i < n_docs})
    if out_of_range:
        shown = ", ".join(map(str, out_of_range[:5]))
        return Parsed(kept, False, f"id(s) out of range 0..{n_docs - 1}: {shown}")
    if len(kept) != len(found):
        return Parsed(kept, False, "duplicate ids")
    return Parsed(kept)


def allowed_text(n_docs: int) -> tuple[str, ...]:
    """The strings a selector may emit, for backends that restrict decoding (MMOA-RAG).

    Ids also come space-prefixed because BPE vocabularies merge " 3" into one token (SmolLM2
    wrote ``<id>1, 2`` once both forms were allowed)."""
    ids = tuple(str(i) for i in range(n_docs))
    return ("<id>", "</id>", "Document", ",", " ", *ids, *(" " + i for i in ids))


def parse_context(docs: Sequence[Passage] | None = None, **_: object) -> dict[str, object]:
    return {"n_docs": len(docs or ())}


def docs_allowed_text(docs: Sequence[Passage] | None = None, **_: object) -> tuple[str, ...]:
    return allowed_text(len(docs or ()))


ROLE = Role(
    name="DS",
    build=build,
    parse=parse,
    max_tokens=40,
    stop=("</id>",),
    parse_context=parse_context,
    allowed_text=docs_allowed_text,
)
