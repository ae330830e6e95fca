"""The five M-ASK roles around a knowledge state of (sub-question, answer) pairs.

plan: pairs and a first answer from the model's own knowledge; search: the next query or
``<end>``; summary: evidence for that query from the retrieved documents; update: which
pair the new (query, evidence) replaces, or that it is appended; answer: the final answer
from the state. Pairs are keyed t1, t2, ... in prompts, as the update role names them.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from marag.roles.answer import parse_tagged_answer
from marag.roles.base import Messages, Parsed, Role
from marag.roles.prompt import DEFAULT_DOC_WORDS, chat, render_docs, render_history, render_state
from marag.roles.tags import find_first, numbered, scan
from marag.types import Passage

UNKNOWN = "unknown"
NO_INFO = "No useful information"

_PLAN_ASK = "Sub-questions with answers, then <predicted_answer></predicted_answer>:"
_PLAN = """Break the question into sub-questions and answer each from your own memory, \
without searching. Write "unknown" when you do not know. Then give your answer to the \
question. Format: <q1></q1><a1></a1><q2></q2><a2></a2>...<predicted_answer></predicted_answer>"""
_PLAN_IN = "Question: In which country was the director of Jaws born?\n" + _PLAN_ASK
_PLAN_OUT = """<q1>Who directed Jaws?</q1>
<a1>Steven Spielberg</a1>
<q2>In which country was Steven Spielberg born?</q2>
<a2>unknown</a2>
<predicted_answer>United States</predicted_answer>"""

_SEARCH = """You decide the next web search. You see the question, what is known so far and \
your earlier searches with what each one found. If something needed is unknown or unsure, \
write one new query, different from earlier searches, inside <search></search>. If nothing \
more is needed, write <end>."""
_SEARCH_IN = """Question: In which country was the director of Jaws born?
Known so far:
t1 question: Who directed Jaws?
t1 answer: Steven Spielberg
t2 question: In which country was Steven Spielberg born?
t2 answer: unknown
Earlier searches:
(none)
Next:"""
_SEARCH_OUT = "<search>Steven Spielberg birthplace</search>"

_SUMMARY = f"""Read the documents and copy the facts that answer the query, in one or two \
short sentences, inside <evidence></evidence>. If no document answers it, write \
<evidence>{NO_INFO}</evidence>."""
_SUMMARY_IN = """Query: Steven Spielberg birthplace
Document0: (Steven Spielberg) Steven Allan Spielberg (born 1946 in Cincinnati, Ohio) is an \
American film director.
Document1: (Jaws) Jaws is a 1975 thriller film.
Evidence, inside <evidence></evidence>:"""
_SUMMARY_OUT = "<evidence>Steven Spielberg was born in Cincinnati, Ohio, United States.</evidence>"

_UPDATE = """A new search query and its evidence arrived. If they answer the same thing as \
an existing pair ti, reply <Update>ti</Update> to replace it. If they add something new, \
reply <Add>tn</Add> with n one more than the number of pairs."""
_UPDATE_IN = """Question: In which country was the director of Jaws born?
Known so far:
t1 question: Who directed Jaws?
t1 answer: Steven Spielberg
t2 question: In which country was Steven Spielberg born?
t2 answer: unknown
New query: Steven Spielberg birthplace
Evidence: Steven Spielberg was born in Cincinnati, Ohio, United States.
Choose one of <Update>t1</Update>, <Update>t2</Update>, <Add>t3</Add>:"""
_UPDATE_OUT = "<Update>t2</Update>"

_ANSWER = """Answer the question from the known facts. Give only the answer, a few words \
long, inside <predicted_answer></predicted_answer>."""
_ANSWER_IN = """Question: In which country was the director of Jaws born?
Known so far:
t1 question: Who directed Jaws?
t1 answer: Steven Spielberg
t2 question: Steven Spielberg birthplace
t2 answer: Steven Spielberg was born in Cincinnati, Ohio, United States.
Answer, inside <predicted_answer></predicted_answer>:"""
_ANSWER_OUT = "<predicted_answer>United States</predicted_answer>"

_INDEX = re.compile(r"(\d{1,6})")


def _known(question: str, state: Sequence[Sequence[str]]) -> str:
    return f"Question: {question.strip()}\nKnown so far:\n{render_state(state)}"


def build_plan(question: str) -> Messages:
    return chat(_PLAN, _PLAN_IN, _PLAN_OUT, f"Question: {question.strip()}\n{_PLAN_ASK}")


def parse_plan(text: str, **_: object) -> Parsed:
    """``{"pairs": [[q, a], ...], "answer": str}``; a question without answer gets "unknown"."""
    if not isinstance(text, str):
        return Parsed({"pairs": [], "answer": UNKNOWN}, False, "completion is not text")
    elements = scan(text)
    answers = {n: e.body for n, e in numbered(elements, "a")}
    pairs: list[list[str]] = []
    problems: list[str] = []
    for n, e in numbered(elements, "q"):
        q = " ".join(e.body.split())
        if not q:
            problems.append(f"empty <q{n}>")
            continue
        a = _unknown_if_blank(answers.get(n, ""))
        if n not in answers:
            problems.append(f"<q{n}> has no <a{n}>")
        pairs.append([q, a])
    final = next((e for e in elements if e.name == "predicted_answer"), None)
    answer = _unknown_if_blank(final.body) if final else UNKNOWN
    if final is None:
        problems.append("no <predicted_answer> tag")
    if not pairs:
        problems.insert(0, "no <qN> sub-question tags")
    value = {"pairs": pairs, "answer": answer}
    return Parsed(value, False, problems[0]) if problems else Parsed(value)


History = Sequence[Sequence[str] | str]


def build_search(question: str, state: Sequence[Sequence[str]], history: History = ()) -> Messages:
    """``history``: the past turns' (query, summary) pairs, as M-ASK's App. C.2 gives the search
    agent (a bare query string is shown as a search that found nothing)."""
    user = (f"{_known(question, state)}\nEarlier searches:\n{render_history(history, NO_INFO)}"
            "\nNext:")
    return chat(_SEARCH, _SEARCH_IN, _SEARCH_OUT, user)


def past_queries(history: History) -> list[str]:
    """The queries of a search history of (query, summary) pairs or bare queries."""
    out = []
    for h in history:
        q = h if isinstance(h, str) else (h[0] if isinstance(h, Sequence) and h else "")
        out.append(str(q))
    return out


def parse_search(text: str, history: History = (), **_: object) -> Parsed:
    """``{"query": q}`` or ``{"end": True}``; a reply with neither ends the search, invalid."""
    if not isinstance(text, str):
        return Parsed({"end": True}, False, "completion is not text")
    first = next((e for e in scan(text) if e.name in ("search", "end")), None)
    if first is None:
        return Parsed({"end": True}, False, "no <search> or <end> tag")
    both = {e.name for e in scan(text)} >= {"search", "end"}
    if first.name == "end":
        return Parsed({"end": True}, not both, "both <search> and <end>" if both else "")
    query = " ".join(first.body.split())
    if not query:
        return Parsed({"end": True}, False, "empty <search>")
    value = {"query": query}
    if both:
        return Parsed(value, False, "both <search> and <end>")
    if query.casefold() in {" ".join(h.split()).casefold() for h in past_queries(history)}:
        return Parsed(value, False, "repeats an earlier search")
    return Parsed(value)


def build_summary(
    question: str, query: str, docs: Sequence[Passage], max_words: int = DEFAULT_DOC_WORDS
) -> Messages:
    # The question is context for relevance; the query is what the evidence must answer.
    user = (
        f"Question: {question.strip()}\nQuery: {query.strip()}\n"
        f"{render_docs(docs, max_words)}\nEvidence, inside <evidence></evidence>:"
    )
    return chat(_SUMMARY, _SUMMARY_IN, _SUMMARY_OUT, user)


def parse_summary(text: str, keep_no_info: bool = False, **_: object) -> Parsed:
    """Evidence text. "No useful information" is a valid reply with value ``""``, or kept as
    text with ``keep_no_info`` (the paper profile)."""
    if not isinstance(text, str):
        return Parsed("", False, "completion is not text")
    element = find_first(text, "evidence")
    if element is None:
        body = " ".join(text.split())
        drop = _is_no_info(body) and not keep_no_info
        return Parsed("" if drop else body, False, "no <evidence> tag")
    body = " ".join(element.body.split())
    if _is_no_info(body) and not keep_no_info:
        return Parsed("")
    if not body:
        return Parsed("", False, "empty <evidence>")
    return Parsed(body)


def build_update(
    question: str, state: Sequence[Sequence[str]], query: str, evidence: str
) -> Messages:
    user = (
        f"{_known(question, state)}\nNew query: {' '.join(query.split())}\n"
        f"Evidence: {' '.join(evidence.split()) or NO_INFO}\n{_choices(len(state))}"
    )
    return chat(_UPDATE, _UPDATE_IN, _UPDATE_OUT, user)


def parse_update(text: str, n_pairs: int = 0, **_: object) -> Parsed:
    """``{"op": "update"|"add", "index": i}`` (1-based). Anything unusable becomes an add."""
    add = {"op": "add", "index": n_pairs + 1}
    if not isinstance(text, str):
        return Parsed(add, False, "completion is not text")
    tags = [e for e in scan(text) if e.name in ("update", "add")]
    if not tags:
        return Parsed(add, False, "no <Update> or <Add> tag")
    first = tags[0]
    m = _INDEX.search(first.body)
    if m is None:
        return Parsed(add, False, f"<{first.name}> names no pair index")
    index = int(m.group(1))
    if first.name == "update":
        if not 1 <= index <= n_pairs:
            return Parsed(add, False, f"update index t{index} out of range 1..{n_pairs}")
        value = {"op": "update", "index": index}
    else:
        if index != n_pairs + 1:
            return Parsed(add, False, f"add index t{index} should be t{n_pairs + 1}")
        value = add
    if len({e.name for e in tags}) > 1:
        return Parsed(value, False, "both <Update> and <Add>")
    return Parsed(value)


def _choices(n_pairs: int) -> str:
    # Spelling out the legal replies lets a small model copy one instead of inventing keys.
    options = [f"<Update>t{i}</Update>" for i in range(1, n_pairs + 1)]
    options.append(f"<Add>t{n_pairs + 1}</Add>")
    return f"Choose one of {', '.join(options)}:"


def build_answer(question: str, state: Sequence[Sequence[str]]) -> Messages:
    return chat(_ANSWER, _ANSWER_IN, _ANSWER_OUT, f"{_known(question, state)}\nAnswer, inside <predicted_answer></predicted_answer>:")


def parse_answer(text: str, **_: object) -> Parsed:
    return parse_tagged_answer(text, "predicted_answer")


def _unknown_if_blank(s: str) -> str:
    s = " ".join(s.split())
    # The M-ASK paper's own prompt spells it "unkown"; read both the same way.
    return UNKNOWN if not s or s.casefold() in ("unknown", "unkown") else s


def _is_no_info(s: str) -> bool:
    return s.casefold().rstrip(".! ") == NO_INFO.casefold()


def search_context(history: History = (), **_: object) -> dict[str, object]:
    return {"history": history}


def update_context(state: Sequence[Sequence[str]] = (), **_: object) -> dict[str, object]:
    return {"n_pairs": len(state)}


PLAN = Role("mask.plan", build_plan, parse_plan, max_tokens=160,
            stop=("</predicted_answer>",))
SEARCH = Role("mask.search", build_search, parse_search, max_tokens=40, stop=("</search>",),
              parse_context=search_context)
SUMMARY = Role("mask.summary", build_summary, parse_summary, max_tokens=80,
               stop=("</evidence>",))
UPDATE = Role("mask.update", build_update, parse_update, max_tokens=12,
              stop=("</Update>", "</Add>", "</update>", "</add>"), parse_context=update_context)
ANSWER = Role("mask.answer", build_answer, parse_answer, max_tokens=32,
              stop=("</predicted_answer>",))
