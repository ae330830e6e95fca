"""Answer roles: the generator (AG, with or without documents) and the summarizer (AS),
which answers a decomposed question from its solved (sub-question, answer) pairs."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from marag.roles.base import Messages, Parsed, Role
from marag.roles.prompt import (
    DEFAULT_DOC_WORDS,
    chat,
    clip_words,
    focus_words,
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


@dataclass(frozen=True, slots=True)
class AnswerPrompt:
    """How AG's prompt with documents is written (without documents it is one fixed prompt).

    The shipped choice (``DEFAULT_AG``) was measured with ``benchmarks/prompts.py`` on
    SmolLM2-135M (docs/results/prompts/): no worked example (with one, the model learnt to
    answer with the first document's title) and the best-ranked document last, right before
    the question, which a small model attends to most. Other settings are named variants in
    ``marag.roles.variants``."""

    example: bool = False  # a worked exchange before the real question
    doc_words: int = DEFAULT_DOC_WORDS  # passages cut to this many words (0: whole)
    doc_style: str = "numbered"  # "numbered": Document0: (t) text; "titled": Doc 1 (Title: t) text
    docs_in_system: bool = False  # documents in the system message (FlashRAG's layout)
    best_last: bool = True  # the best-ranked document last, right before the question
    example_in: str = _AG_EX_DOCS
    example_out: str = "<answer>Mount Everest</answer>"
    # cut each passage to the window of ``doc_words`` words sharing most words with the
    # question (instead of its first ``doc_words`` words)
    focus: bool = False

    def docs(self, docs: Sequence[Passage], question: str = "") -> str:
        """One line per passage, numbered by rank (0 = best) whatever the order shown."""
        ranked = list(enumerate(docs))
        lines = []
        for rank, d in reversed(ranked) if self.best_last else ranked:
            text = (focus_words(d.text, question, self.doc_words) if self.focus
                    else clip_words(d.text, self.doc_words))
            if self.doc_style == "titled":
                lines.append(f"Doc {rank + 1} (Title: {d.title}) {text}")
            else:
                lines.append(f"Document{rank}: ({d.title}) {text}")
        return "\n".join(lines)

    def build(self, question: str, docs: Sequence[Passage] | None = None,
              rewrite: str | None = None) -> Messages:
        """``rewrite``: the search query QR wrote earlier in this round (JADE Algorithm 1 line
        19: each solving agent's output joins the context of the agents after it)."""
        q = question.strip() + rewrite_line(rewrite)
        if not docs:
            return chat(_AG_NO_DOCS, _AG_EX_NO_DOCS, "<answer>Paris</answer>",
                        f"Question: {q}\n{_ASK}")
        rendered = self.docs(docs, q)
        if self.docs_in_system:
            system, user = f"{_AG_DOCS}\nDocuments:\n{rendered}", f"Question: {q}\n{_ASK}"
        else:
            system, user = _AG_DOCS, f"{rendered}\nQuestion: {q}\n{_ASK}"
        if self.example:
            return chat(system, self.example_in, self.example_out, user)
        return [{"role": "system", "content": system}, {"role": "user", "content": user}]


DEFAULT_AG = AnswerPrompt()


def build_ag(question: str, docs: Sequence[Passage] | None = None,
             rewrite: str | None = None) -> Messages:
    return DEFAULT_AG.build(question, docs, rewrite)


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
