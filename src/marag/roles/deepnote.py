"""DeepNote's five roles around one note: the knowledge gathered so far for a question.

DeepNote (Wang et al., 2024, "Retriever-and-Memory: Towards Adaptive Note-Enhanced
Retrieval-Augmented Generation"; the authors' code: thunlp/Adaptive-Note, ``src/main.py``,
``prompts/en``) writes a note from the first documents, then loops: a new query from the
question, the best note and the past queries; documents for it; an updated note from them and
the best note; a comparison that keeps the updated note only when it is better; the answer
comes from the best note. One role per prompt:

* ``deepnote.init``: the first note from the question's documents, ``<note>...</note>``;
* ``deepnote.query``: one or two new search queries, each ``<query>...</query>``;
* ``deepnote.update``: the best note with what the new documents add, ``<note>...</note>``;
* ``deepnote.compare``: whether the updated note (Note 2) is better than the best one
  (Note 1), ``<better>yes</better>`` or ``<better>no</better>`` (the authors' JSON
  ``{"status": "True"}``, in marag's tag style);
* ``deepnote.answer``: the answer from the best note, ``<answer>...</answer>``.

The prompts are marag's words (each with one short worked example, as every marag prompt for
small models); the inputs and output contracts are the authors'. A parser keeps what it can
read and marks the step invalid with its reason: a note without its tags is the whole reply
(trimmed); a comparison that cannot be read keeps the old note.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from marag.roles.answer import parse_tagged_answer
from marag.roles.base import Messages, Parsed, Role
from marag.roles.prompt import DEFAULT_DOC_WORDS, chat, render_docs
from marag.roles.tags import find_all, find_first, first_line, strip_tags
from marag.types import Passage

INIT = "deepnote.init"
QUERY = "deepnote.query"
UPDATE = "deepnote.update"
COMPARE = "deepnote.compare"
ANSWER = "deepnote.answer"
NAMES = (INIT, QUERY, UPDATE, COMPARE, ANSWER)

# queries kept from one reply: the authors ask for two; a third is the model rambling
MAX_QUERIES = 3

_Q = "In which country was the director of Jaws born?"
_D_JAWS = ("Document0: (Jaws (film)) Jaws is a 1975 American thriller film directed by "
           "Steven Spielberg.\nDocument1: (Shark) Sharks are a group of fish with a skeleton "
           "of cartilage.")
_N1 = "Jaws is a 1975 American thriller film directed by Steven Spielberg."
_D_SPIELBERG = ("Document0: (Steven Spielberg) Steven Allan Spielberg (born 1946 in "
                "Cincinnati, Ohio) is an American film director.")
_N2 = (f"{_N1} Steven Allan Spielberg was born in 1946 in Cincinnati, Ohio, and is an "
       "American film director.")

_INIT = """Write a note that will help answer the question. Collect every fact from the \
documents that bears on it, in the documents' own words, as one connected paragraph inside \
<note></note>. Leave out what does not help. Do not answer the question yet."""
_INIT_ASK = "Note, inside <note></note>:"

_QUERY = """You gather facts to answer a question. From the question, the note written so \
far and the searches already made, write one or two new search queries for what the note \
still lacks, each inside <query></query>. Use keywords, and do not repeat an earlier search."""
_QUERY_ASK = "New queries, each inside <query></query>:"

_UPDATE = """Improve the note with the new documents. Keep everything the note says and add \
each fact from the documents that helps answer the question and is not in the note yet, in \
the documents' own words. Write the whole improved note inside <note></note>."""

_COMPARE = """Two notes were written for the same question. Is Note 2 clearly better than \
Note 1 for answering it, because it adds facts that matter for the question? Repeated or \
padded text is not better. Reply <better>yes</better> or <better>no</better>, nothing else."""
_COMPARE_ASK = "Reply <better>yes</better> or <better>no</better>:"

_ANSWER = """Answer the question from the note. Give only the answer, a few words long, \
inside <answer></answer>."""
_ANSWER_ASK = "Answer, inside <answer></answer>:"


def _q(question: str) -> str:
    return f"Question: {' '.join(question.split())}"


def _note(note: str, label: str = "Note") -> str:
    return f"{label}: {' '.join(note.split()) or '(empty)'}"


def build_init(question: str, docs: Sequence[Passage] = (),
               max_words: int = DEFAULT_DOC_WORDS) -> Messages:
    user = f"{_q(question)}\n{render_docs(docs, max_words)}\n{_INIT_ASK}"
    return chat(_INIT, f"{_q(_Q)}\n{_D_JAWS}\n{_INIT_ASK}", f"<note>{_N1}</note>", user)


def build_query(question: str, note: str, history: Sequence[str] = ()) -> Messages:
    """``history``: the queries written at earlier steps (the authors' query list), on one
    line: listed one per line, SmolLM2 went on with the list instead of answering."""
    def user(q: str, n: str, h: Sequence[str]) -> str:
        earlier = "; ".join(" ".join(x.split()) for x in h) or "none"
        return f"{_q(q)}\n{_note(n)}\nEarlier searches: {earlier}\n{_QUERY_ASK}"

    return chat(_QUERY, user(_Q, _N1, ()), "<query>Steven Spielberg birthplace</query>",
                user(question, note, history))


def build_update(question: str, note: str, docs: Sequence[Passage] = (),
                 max_words: int = DEFAULT_DOC_WORDS) -> Messages:
    def user(q: str, n: str, d: str) -> str:
        return f"{_q(q)}\n{_note(n)}\nNew documents:\n{d}\n{_INIT_ASK}"

    return chat(_UPDATE, user(_Q, _N1, _D_SPIELBERG), f"<note>{_N2}</note>",
                user(question, note, render_docs(docs, max_words)))


def build_compare(question: str, best: str, new: str) -> Messages:
    def user(q: str, one: str, two: str) -> str:
        return f"{_q(q)}\n{_note(one, 'Note 1')}\n{_note(two, 'Note 2')}\n{_COMPARE_ASK}"

    return chat(_COMPARE, user(_Q, _N1, _N2), "<better>yes</better>", user(question, best, new))


def build_answer(question: str, note: str) -> Messages:
    ex = f"{_note(_N2)}\n{_q(_Q)}\n{_ANSWER_ASK}"
    return chat(_ANSWER, ex, "<answer>United States</answer>",
                f"{_note(note)}\n{_q(question)}\n{_ANSWER_ASK}")


def parse_note(text: str, **_: object) -> Parsed:
    """The note's text (whitespace folded). Without ``<note>``, the whole reply without any
    tags, recorded invalid; an empty note is invalid."""
    if not isinstance(text, str):
        return Parsed("", False, "completion is not text")
    element = find_first(text, "note")
    if element is None:
        body = strip_tags(text)
        return Parsed(body, False, "no <note> tag; the whole reply is the note" if body
                      else "empty completion")
    body = " ".join(element.body.split())
    if not body:
        return Parsed("", False, "empty <note>")
    return Parsed(body)


def _fold(s: str) -> str:
    return " ".join(s.split()).casefold()


def parse_query(text: str, history: Sequence[str] = (), **_: object) -> Parsed:
    """The queries, in order (at most ``MAX_QUERIES``). Without ``<query>`` tags, the reply's
    first line, recorded invalid; nothing readable: ``[]``. A query that repeats an earlier
    one is kept but the step is recorded invalid (the prompt asks for new ones)."""
    if not isinstance(text, str):
        return Parsed([], False, "completion is not text")
    elements = find_all(text, "query")
    if not elements:
        line = strip_tags(first_line(text))
        return Parsed([line] if line else [], False,
                      "no <query> tag; the first line is the query" if line else "empty completion")
    queries: list[str] = []
    for e in elements:
        q = " ".join(e.body.split())
        if q and _fold(q) not in {_fold(x) for x in queries}:
            queries.append(q)
    queries = queries[:MAX_QUERIES]
    if not queries:
        return Parsed([], False, "empty <query>")
    earlier = {_fold(h) for h in history}
    repeated = [q for q in queries if _fold(q) in earlier]
    if repeated:
        return Parsed(queries, False, f"repeats an earlier search: {repeated[0]!r}")
    return Parsed(queries)


_YES = frozenset({"yes", "true"})
_NO = frozenset({"no", "false"})
_WORD = re.compile(r"[a-z]+")


def _verdict(s: str) -> bool | None:
    words = _WORD.findall(s.casefold())
    if len(words) == 1 and words[0] in _YES | _NO:
        return words[0] in _YES
    return None


def parse_compare(text: str, **_: object) -> Parsed:
    """True when Note 2 is judged better. ``<better>`` holding anything but yes/no (or
    true/false), or no tag at all, keeps the old note (False), recorded invalid; a bare
    "yes"/"no" reply is read but recorded invalid too."""
    if not isinstance(text, str):
        return Parsed(False, False, "completion is not text")
    element = find_first(text, "better")
    if element is None:
        bare = _verdict(text)
        if bare is not None:
            return Parsed(bare, False, "no <better> tag; the bare reply was read")
        return Parsed(False, False, "no <better> tag; the old note is kept")
    verdict = _verdict(element.body)
    if verdict is None:
        return Parsed(False, False, "<better> holds neither yes nor no; the old note is kept")
    return Parsed(verdict)


def parse_answer(text: str, **_: object) -> Parsed:
    return parse_tagged_answer(text, "answer")


def _query_context(history: Sequence[str] = (), **_: object) -> dict[str, object]:
    return {"history": list(history)}


INIT_ROLE = Role(INIT, build_init, parse_note, max_tokens=256, stop=("</note>",))
QUERY_ROLE = Role(QUERY, build_query, parse_query, max_tokens=64,
                  parse_context=_query_context)
UPDATE_ROLE = Role(UPDATE, build_update, parse_note, max_tokens=384, stop=("</note>",))
COMPARE_ROLE = Role(COMPARE, build_compare, parse_compare, max_tokens=16, stop=("</better>",))
ANSWER_ROLE = Role(ANSWER, build_answer, parse_answer, max_tokens=32, stop=("</answer>",))
ROLES = (INIT_ROLE, QUERY_ROLE, UPDATE_ROLE, COMPARE_ROLE, ANSWER_ROLE)
