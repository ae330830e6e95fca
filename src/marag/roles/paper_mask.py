"""The ``paper`` profile of ``m-ask``: M-ASK's summary agent as its App. C.3 has it.

The summary agent sees the search query and the retrieved documents only (marag's default
also shows it the original question), and its "No useful information" reply is kept as the
evidence text, so the update agent, the knowledge state and the search history show that the
search found nothing (the default turns it into empty evidence). The other four M-ASK roles
keep the default prompts, whose tags are the paper's.
"""

from __future__ import annotations

from collections.abc import Sequence

from marag.roles import mask
from marag.roles.base import Messages, Parsed, Role
from marag.roles.prompt import DEFAULT_DOC_WORDS, render_docs
from marag.types import Passage

_SUMMARY = f"""You pull evidence out of documents. Given a search query and the documents it \
found, write the evidence from the documents that answers the query inside \
<evidence></evidence>. If the documents hold no such evidence, write \
<evidence>{mask.NO_INFO}</evidence>. Write nothing outside the tags."""


def build_summary(query: str, docs: Sequence[Passage], max_words: int = DEFAULT_DOC_WORDS,
                  **_: object) -> Messages:
    """The query and the documents; other inputs (the original question) are not shown."""
    user = f"Query: {query.strip()}\nCandidate documents:\n{render_docs(docs, max_words)}"
    return [{"role": "system", "content": _SUMMARY}, {"role": "user", "content": user}]


def parse_summary(text: str, **_: object) -> Parsed:
    """The ``<evidence>`` body, "No useful information" included as text."""
    return mask.parse_summary(text, keep_no_info=True)


ROLES: dict[str, Role] = {
    "mask.summary": Role("mask.summary", build_summary, parse_summary, max_tokens=80,
                         stop=("</evidence>",)),
}
