"""Search-o1's two roles: the reasoning model that searches mid-thought, and its
Reason-in-Documents step (Li et al., 2025; the authors' ``scripts/run_search_o1.py`` and
``scripts/prompts.py``, sunnynexus/Search-o1).

``search-o1`` (the reasoning turns):

* one user turn: an instruction naming the four markers and the search limit, a worked
  two-hop example, then the question with the QA answer format ``\\boxed{ANSWER}`` (all in
  marag's words; the markers, the limit, the example's shape and the answer format are the
  authors');
* the model reasons in free text; to search it writes ``<|begin_search_query|> query
  <|end_search_query|>`` and decoding stops at the end marker (put back when a backend drops
  it: ``Role.closes_stop``, ``tags.reclose``);
* a turn searches when its text ends with the end marker; the query is the last complete
  query block of the turn (the authors' rule); a turn that ends otherwise is the last one and
  its answer is the last ``\\boxed{...}`` in it (``\\text{...}`` inside unwrapped, surrounding
  parentheses dropped, as the authors' QA evaluation does);
* the turns are one growing assistant text: each call continues the model's own text plus
  what was inserted after each query.

``search-o1.rid`` (Reason-in-Documents): one user turn with the previous reasoning steps (cut
as the authors cut them: ``previous_steps``), the current query and the retrieved documents;
the reply ends in ``**Final Information**`` and the helpful information, or "No helpful
information found." (the authors' fallback, also what an unreadable reply inserts). The
question itself is not shown, as in the authors' code.
"""

from __future__ import annotations

from collections.abc import Sequence

from marag.roles.base import Messages, Parsed, Role
from marag.types import Passage

NAME = "search-o1"
RID = "search-o1.rid"

BEGIN_QUERY, END_QUERY = "<|begin_search_query|>", "<|end_search_query|>"
BEGIN_RESULT, END_RESULT = "<|begin_search_result|>", "<|end_search_result|>"
MARKERS = (BEGIN_QUERY, END_QUERY, BEGIN_RESULT, END_RESULT)
FINAL = "**Final Information**"
NO_INFO = "No helpful information found."

_INSTRUCTION = """You are a reasoning assistant who can search while reasoning, to answer \
the question correctly. To search, write <|begin_search_query|> your query \
<|end_search_query|>. The system then searches, reads the documents and gives you what \
helps between <|begin_search_result|> and <|end_search_result|>. Search as often as you need \
(at most {limit} searches), then carry on reasoning.

Example: "Where was the director of Jaws born?" First find the director:
<|begin_search_query|>director of Jaws<|end_search_query|>
Then, with the result (Steven Spielberg), his birthplace:
<|begin_search_query|>Steven Spielberg birthplace<|end_search_query|>

Think step by step. Give the final answer as \\boxed{{YOUR_ANSWER}}.

Question:
{question}
"""

_RID = """Read the searched documents for the current search query, given the previous \
reasoning steps. Pick out the accurate facts that answer the query and move the reasoning \
forward. End with "**Final Information**" and those facts, or with "**Final Information**" \
and "No helpful information found." when the documents hold none.

Previous reasoning steps:
{prev}

Current search query: {query}

Searched documents:
{docs}
"""

# what is inserted instead of information when a search is refused (marag's wording of the
# authors' two notes)
LIMIT_NOTE = "The search limit has been reached. No more searches are allowed."
REPEAT_NOTE = "This query has already been searched. Use the earlier results."


def build(question: str, transcript: str = "", max_searches: int = 10) -> Messages:
    """The user turn (instruction + question), then the reasoning so far as an open assistant
    turn that the model continues (none on the first call)."""
    user = _INSTRUCTION.format(limit=max_searches, question=question.strip())
    messages: Messages = [{"role": "user", "content": user}]
    if transcript:
        messages.append({"role": "assistant", "content": transcript})
    return messages


def _last_query(text: str) -> str | None:
    """The last complete query block, matched left to right as the authors' non-greedy
    regex does (linear: each search starts where the previous match ended)."""
    found, at = None, 0
    while True:
        b = text.find(BEGIN_QUERY, at)
        if b < 0:
            return found
        e = text.find(END_QUERY, b + len(BEGIN_QUERY))
        if e < 0:
            return found
        found, at = text[b + len(BEGIN_QUERY):e], e + len(END_QUERY)


def boxed(text: str) -> str | None:
    """The last ``\\boxed{...}`` of ``text`` (braces balanced), with a ``\\text{...}`` inside
    unwrapped and surrounding parentheses dropped; None when there is none."""
    if not isinstance(text, str) or "\\boxed{" not in text:
        return None
    key = "\\boxed{"
    starts = []  # brace depth at which each open \boxed{ began, with its content start
    depth, best, i, n = 0, None, 0, len(text)
    while i < n:
        if text.startswith(key, i):
            depth += 1
            starts.append((depth, i + len(key)))
            i += len(key)
            continue
        c = text[i]
        if c == "{":
            depth += 1
        elif c == "}" and depth > 0:
            if starts and starts[-1][0] == depth:
                best = text[starts.pop()[1]:i]
            depth -= 1
        i += 1
    if best is None:
        return None
    inner = best
    t = inner.rfind("\\text{")
    if t >= 0:
        close = inner.rfind("}")
        if close > t:
            inner = inner[t + len("\\text{"):close]
    return inner.strip().strip("()").strip()


def parse(text: str) -> Parsed:
    """The turn's action: ``{"action": "search" | "answer" | None, "content": str}``."""
    if not isinstance(text, str):
        return Parsed({"action": None, "content": ""}, False, "completion is not text")
    if text.rstrip().endswith(END_QUERY):
        query = _last_query(text)
        if query is None:
            return Parsed({"action": None, "content": ""}, False,
                          f"{END_QUERY} without {BEGIN_QUERY}")
        if not query.strip():
            return Parsed({"action": "search", "content": ""}, False, "empty search query")
        return Parsed({"action": "search", "content": query.strip()}, True)
    answer = boxed(text)
    if answer is not None:
        if not answer:
            return Parsed({"action": "answer", "content": ""}, False, "empty \\boxed{} answer")
        return Parsed({"action": "answer", "content": answer}, True)
    if text.rfind(BEGIN_QUERY) > text.rfind(END_QUERY):
        return Parsed({"action": None, "content": ""}, False, "search query never closed")
    return Parsed({"action": None, "content": ""}, False, "no search query and no \\boxed{} answer")


def result(info: str) -> str:
    """What goes into the reasoning after a search: the extraction between the result markers,
    surrounded by blank lines (the authors' layout)."""
    return f"\n\n{BEGIN_RESULT}{info}{END_RESULT}\n\n"


def refusal(note: str) -> str:
    """What goes into the reasoning instead when a search is refused (the authors' layout)."""
    return f"\n{BEGIN_RESULT}\n{note}\n{END_RESULT}\n"


def previous_steps(reasoning: str) -> str:
    """The reasoning so far as Reason-in-Documents sees it, cut as the authors cut it: each
    non-blank line is a numbered step; with more than five steps only the first, the last four
    and those holding a search query or result are kept, each run of dropped ones shown as
    ``...``."""
    lines = [ln for ln in reasoning.split("\n") if ln.strip()] if isinstance(reasoning, str) else []
    steps = [f"Step {i}: {ln}" for i, ln in enumerate(lines, 1)]
    if len(steps) <= 5:
        return "\n\n".join(steps)
    kept: list[str] = []
    for i, step in enumerate(steps):
        if i == 0 or i >= len(steps) - 4 or BEGIN_QUERY in step or BEGIN_RESULT in step:
            kept.append(step)
        elif not kept or kept[-1] != "...":
            kept.append("...")
    return "\n\n".join(kept)


def documents(passages: Sequence[Passage]) -> str:
    """The retrieved passages as Reason-in-Documents reads them."""
    return "\n".join(f"**Document {i}** (Title: {p.title})\n{p.text}\n"
                     for i, p in enumerate(passages, 1)).strip()


def build_rid(prev_reasoning: str, query: str, docs: Sequence[Passage]) -> Messages:
    prompt = _RID.format(prev=prev_reasoning.strip() or "(none yet)", query=query.strip(),
                         docs=documents(docs) or "(no documents found)")
    return [{"role": "user", "content": prompt}]


def parse_rid(text: str) -> Parsed:
    """The extraction: the text after the last ``**Final Information**``, lines joined,
    backticks, the markers and a leading colon removed. Without it (or with nothing after it) the reply is
    invalid and the authors' fallback, "No helpful information found.", is inserted."""
    if not isinstance(text, str):
        return Parsed(NO_INFO, False, "completion is not text")
    at = text.rfind(FINAL)
    if at < 0:
        return Parsed(NO_INFO, False, f"no {FINAL} section")
    info = text[at + len(FINAL):]
    for marker in MARKERS:
        info = info.replace(marker, " ")
    info = " ".join(info.split()).strip("`").strip().removeprefix(":").strip()
    if not info:
        return Parsed(NO_INFO, False, f"nothing after {FINAL}")
    return Parsed(info, True)


# cache_prompt: the reasoning is continued turn by turn (search-r1's), computed only where new
ROLE = Role(NAME, build, parse, max_tokens=1024, stop=(END_QUERY,), closes_stop=True,
            cache_prompt=True)
RID_ROLE = Role(RID, build_rid, parse_rid, max_tokens=512)
