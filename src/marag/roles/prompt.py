"""How role inputs are written into prompts: documents, solved pairs, knowledge states.

Every prompt is a short system instruction, one worked example given as an earlier
user/assistant exchange (small models copy the shape of a previous reply far more reliably
than they follow a described format), then the real input. The example reply starts with the
opening tag, so the real reply is expected to as well. Where SmolLM2-135M still drifted into
prose (answers, selection, evidence, M-ASK plan and update), the user turn ends by restating
the tag to use.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from marag.roles.base import Messages
from marag.types import Passage

# Passages are cut to this many words so that five of them fit a small model's context.
DEFAULT_DOC_WORDS = 100


def clip_words(text: str, max_words: int) -> str:
    words = text.split()
    if max_words <= 0 or len(words) <= max_words:
        return " ".join(words)
    return " ".join(words[:max_words]) + " ..."


# words that say nothing about a question's topic (question words, articles, auxiliaries)
STOP_WORDS = frozenset([
    "a", "an", "and", "are", "as", "at", "be", "by", "did", "do", "does", "for", "from", "had",
    "has", "have", "he", "her", "his", "how", "in", "is", "it", "its", "of", "on", "or", "she",
    "that", "the", "their", "them", "they", "this", "to", "was", "were", "what", "when",
    "where", "which", "who", "whom", "whose", "why", "will", "with",
])
_WORD = re.compile(r"[a-z0-9]+")


def content_words(text: str) -> set[str]:
    """The lower-cased alphanumeric words of ``text`` that are not ``STOP_WORDS``."""
    return {w for w in _WORD.findall(text.lower()) if w not in STOP_WORDS}


def focus_words(text: str, query: str, max_words: int) -> str:
    """``text`` cut to a ``max_words``-word window holding the most words of ``query`` (stop
    words aside), with ``...`` where words were left out. Of the windows that hold as many,
    the middle one is kept, so the matches sit near its centre with context on both sides;
    the start of the text when nothing matches. ``max_words`` <= 0 keeps the whole text."""
    words = text.split()
    if max_words <= 0 or len(words) <= max_words:
        return " ".join(words)
    wanted = content_words(query)
    hits = [not wanted.isdisjoint(content_words(w)) for w in words]
    score = sum(hits[:max_words])
    scores = [score]
    for i in range(1, len(words) - max_words + 1):
        score += hits[i + max_words - 1] - hits[i - 1]
        scores.append(score)
    best = max(scores)
    tied = [i for i, s in enumerate(scores) if s == best]
    start = tied[len(tied) // 2] if best else 0
    end = start + max_words
    return ("... " if start else "") + " ".join(words[start:end]) + (
        " ..." if end < len(words) else "")


def render_docs(docs: Sequence[Passage] | None, max_words: int = DEFAULT_DOC_WORDS) -> str:
    """``Document{i}: ({title}) {text}``, one per line, numbered from 0 in the given order."""
    if not docs:
        return "(no documents)"
    return "\n".join(
        f"Document{i}: ({d.title}) {clip_words(d.text, max_words)}" for i, d in enumerate(docs)
    )


def render_pairs(pairs: Iterable[Sequence[str]]) -> str:
    """Solved (sub-question, answer) pairs as numbered lines."""
    lines = [f"{i}. {_one_line(q)} -> {_one_line(a)}" for i, (q, a) in enumerate(_pairs(pairs), 1)]
    return "\n".join(lines) if lines else "(none)"


def render_state(state: Iterable[Sequence[str]]) -> str:
    """An M-ASK knowledge state: pairs keyed t1, t2, ... (the keys the update role names)."""
    # One line per field: on a single "Q | A" line small models ran on past the answer.
    lines = [
        f"t{i} question: {_one_line(q)}\nt{i} answer: {_one_line(a)}"
        for i, (q, a) in enumerate(_pairs(state), 1)
    ]
    return "\n".join(lines) if lines else "(empty)"


def rewrite_line(rewrite: str | None) -> str:
    """The line that shows a role the query QR wrote earlier in its round ("" for none)."""
    r = _one_line(rewrite or "")
    return f"\nRewritten as: {r}" if r else ""


def render_history(history: Iterable[Sequence[str] | str], no_info: str) -> str:
    """M-ASK's search history: each past query with the summary its search gave (``no_info``
    where the summary found nothing)."""
    lines = []
    for i, item in enumerate(history, 1):
        query, summary = (item, "") if isinstance(item, str) else _pairs([item])[0]
        lines.append(f"{i}. query: {_one_line(query)}\n{i}. found: {_one_line(summary) or no_info}")
    return "\n".join(lines) if lines else "(none)"


def render_list(items: Iterable[str]) -> str:
    lines = [f"- {_one_line(s)}" for s in items]
    return "\n".join(lines) if lines else "(none)"


def chat(system: str, example_in: str, example_out: str, user: str) -> Messages:
    return [
        {"role": "system", "content": system},
        {"role": "user", "content": example_in},
        {"role": "assistant", "content": example_out},
        {"role": "user", "content": user},
    ]


def _pairs(pairs: Iterable[Sequence[str]]) -> list[tuple[str, str]]:
    out = []
    for p in pairs:
        if len(p) != 2:
            raise ValueError(f"expected a (question, answer) pair, got {p!r}")
        out.append((str(p[0]), str(p[1])))
    return out


def _one_line(s: str) -> str:
    return " ".join(str(s).split())
