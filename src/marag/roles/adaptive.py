"""Adaptive-RAG's query-complexity classifier (Jeong et al., 2024) as a role of the shared LLM.

It reads the question alone and writes one label: ``A`` (answerable without retrieval),
``B`` (one retrieval for the question suffices) or ``C`` (several retrievals that build on
each other). The paper's classifier is a separate T5-large trained on silver labels; marag's
is the backbone itself, warm-started on the same kind of silver labels
(``marag sft --recipe adaptive``) and restricted to the three letters on the hf backend.
"""

from __future__ import annotations

import re

from marag.roles.base import Messages, Parsed, Role

NAME = "adaptive.classify"
LABELS = ("A", "B", "C")

_SYSTEM = """Decide how much searching a question needs before it can be answered.
A: the answer is well-known; no search is needed.
B: one search for the question itself finds the answer.
C: the answer needs several searches, each building on the last (a multi-hop question).
Reply with one letter inside <label></label>."""

_LABEL = re.compile(r"<label>\s*([ABC])\s*(?:</label>|$)")


def build(question: str) -> Messages:
    return [{"role": "system", "content": _SYSTEM},
            {"role": "user", "content": f"Question: {question.strip()}"}]


def parse(text: str) -> Parsed:
    """The label letter; a reply that is only the letter is read too."""
    if not isinstance(text, str):
        return Parsed("", False, "completion is not text")
    m = _LABEL.search(text)
    if m is not None:
        return Parsed(m.group(1), True)
    bare = text.strip().strip(".").strip()
    if bare in LABELS:
        return Parsed(bare, True)
    return Parsed("", False, "no <label> with A, B or C")


def allowed(**_: object) -> tuple[str, ...]:
    return (*LABELS, "</label>")


ROLE = Role(NAME, build, parse, max_tokens=4, stop=("</label>",), allowed_text=allowed,
            reply_prefix="<label>")
