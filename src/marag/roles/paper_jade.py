"""The ``paper`` profile of ``jade``: JADE's App. E prompts in marag's words.

JADE's output formats are the ones marag's default prompts use (``<workflow>``, ``<query>``,
``<qN>``, ``<id>``, ``<answer>``), so the default roles stand for the others. What differs is
AG's instruction (App. E.6): answer only from the documents and say "I don't know" when they
do not hold the answer, where marag's default asks for a best guess. The prompt is zero-shot,
like the paper's.
"""

from __future__ import annotations

from collections.abc import Sequence

from marag.roles import answer
from marag.roles.base import Messages, Role
from marag.roles.prompt import DEFAULT_DOC_WORDS, render_docs, rewrite_line
from marag.types import Passage

DONT_KNOW = "I don't know"

_AG = f"""You answer the question briefly and accurately from the documents given with it. \
Use only what the documents say and invent nothing. If the documents do not contain the \
answer, reply "{DONT_KNOW}"."""
_AG_NO_DOCS = f"""You answer the question briefly and accurately. Invent nothing; if you do \
not know the answer, reply "{DONT_KNOW}"."""
_ASK = "Write the brief answer inside <answer></answer> and nothing else."


def build_ag(question: str, docs: Sequence[Passage] | None = None,
             max_words: int = DEFAULT_DOC_WORDS, rewrite: str | None = None) -> Messages:
    q = question.strip() + rewrite_line(rewrite)
    if not docs:
        return [{"role": "system", "content": _AG_NO_DOCS},
                {"role": "user", "content": f"Question: {q}\n{_ASK}"}]
    return [{"role": "system", "content": _AG},
            {"role": "user", "content": f"Question: {q}\n{render_docs(docs, max_words)}\n{_ASK}"}]


ROLES: dict[str, Role] = {
    "AG": Role("AG", build_ag, answer.parse_answer, max_tokens=32, stop=("</answer>",)),
}
