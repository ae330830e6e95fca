"""The ``paper`` profile's document selector, shared by MAO-ARAG (Table 11) and MMOA-RAG
(Table 1), whose selectors are the same: the question and numbered candidates in one turn, then
a request for the helpful ids written ``Document0,Document4,...`` with no tags.

Restricted decoding (MMOA-RAG Eq. 5) allows exactly ``"0"`` .. ``"K-1"``, ``"Document"`` and
``","``. The parser is the default selector's, which reads the bare form as valid when the
reply is nothing but document ids (and the tagged forms too).
"""

from __future__ import annotations

from collections.abc import Sequence

from marag.roles import select
from marag.roles.base import Messages, Role
from marag.roles.prompt import DEFAULT_DOC_WORDS, render_docs, rewrite_line
from marag.types import Passage

_SYSTEM = """You help answer questions with documents. Say which of the candidate documents, \
numbered from 0, help answer the question, by their ids."""
_ACK = "Fine: I will name the candidate documents that help answer the question."
_GOT = "I have the question and the candidate documents."


def build(question: str, docs: Sequence[Passage], max_words: int = DEFAULT_DOC_WORDS,
          rewrite: str | None = None) -> Messages:
    q = question.strip() + rewrite_line(rewrite)
    last = max(len(docs) - 1, 0)
    ask = (f"Which of the candidate documents (0 to {last}) help answer this question: {q}\n"
           "Write only their ids in this form: Document0,Document4,Document6")
    return [
        {"role": "system", "content": _SYSTEM},
        {"role": "assistant", "content": _ACK},
        {"role": "user", "content": f"Question: {q}\n{render_docs(docs, max_words)}"},
        {"role": "assistant", "content": _GOT},
        {"role": "user", "content": ask},
    ]


def allowed_text(docs: Sequence[Passage] | None = None, **_: object) -> tuple[str, ...]:
    """MMOA-RAG Eq. 5: the ids, the word ``Document`` and the comma, nothing else."""
    return ("Document", ",", *(str(i) for i in range(len(docs or ()))))


ROLE = Role(
    name="DS",
    build=build,
    parse=select.parse,
    max_tokens=40,
    parse_context=select.parse_context,
    allowed_text=allowed_text,
)
