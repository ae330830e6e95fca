"""Search-R1's single agent: one LLM that thinks, searches and answers in tagged text.

The protocol follows Search-R1 (Jin et al., 2025) and its released code, element by element:

* one user turn: an instruction naming the four tags, then the question (the instruction is
  written in marag's words; its tags, their order and the worked ``<answer>`` example are the
  paper's);
* the model writes ``<think>...</think>`` and then one action: ``<search> query </search>``
  or ``<answer> ... </answer>``; decoding stops at ``</search>`` or ``</answer>``;
* the first ``<search>`` or ``<answer>`` block of a turn is its action (the paper's
  ``re.search(r"<(search|answer)>(.*?)</\\1>")``); a turn with neither is invalid and the
  next turn is shown a short correction instead of documents;
* search results come back as ``<information>Doc i(Title: t) text ...</information>``,
  surrounded by blank lines, top-3 passages by default;
* the turns are one growing assistant message: each call continues the model's own text
  (plus the observations appended to it), so a trajectory is one sequence.

The correction note and the instruction are marag's wording (the paper's would be copied
text); both say the same things as the paper's.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from marag.roles.base import Messages, Parsed, Role
from marag.types import Passage

NAME = "search-r1"

_INSTRUCTION = """Answer the question below. Each time you receive new information, reason \
about it first inside <think> and </think>. If you find that you are missing knowledge, \
call the search engine by writing a query between <search> and </search>; its top results \
will be returned between <information> and </information>. You may search as many times as \
you need. Once no further outside knowledge is needed, write the final answer between \
<answer> and </answer>, with no explanation, for example <answer> Beijing </answer>. \
Question: """

# shown after a turn whose action could not be read (the paper also shows a note, not documents)
INVALID_NOTE = ("\nThat action could not be read. To search, I must write the query "
                "between <search> and </search>. To give the final answer, I must write it "
                "between <answer> and </answer>. Let me try again.\n")

_ACTION = re.compile(r"<(search|answer)>(.*?)</\1>", re.DOTALL)
STOP = ("</search>", "</answer>")


def build(question: str, transcript: str = "") -> Messages:
    """The user turn (instruction + question), then the trajectory so far as an open
    assistant turn that the model continues (none on the first call)."""
    messages: Messages = [{"role": "user", "content": _INSTRUCTION + question.strip() + "\n"}]
    if transcript:
        messages.append({"role": "assistant", "content": transcript})
    return messages


def parse(text: str) -> Parsed:
    """The turn's action: ``{"action": "search" | "answer" | None, "content": str}``."""
    if not isinstance(text, str):
        return Parsed({"action": None, "content": ""}, False, "completion is not text")
    m = _ACTION.search(text)
    if m is None:
        opened = [t for t in ("search", "answer") if f"<{t}>" in text]
        why = (f"<{opened[0]}> was never closed" if opened
               else "no <search> or <answer> block")
        return Parsed({"action": None, "content": ""}, False, why)
    action, content = m.group(1), m.group(2).strip()
    if not content:
        return Parsed({"action": action, "content": ""}, False, f"empty <{action}> block")
    return Parsed({"action": action, "content": content}, True)


def information(passages: Sequence[Passage]) -> str:
    """The observation block appended after a search, in the paper's layout."""
    body = "".join(f"Doc {i}(Title: {p.title}) {p.text}\n" for i, p in enumerate(passages, 1))
    return f"\n\n<information>{body.strip()}</information>\n\n"


# cache_prompt: each turn's prompt is the last one's with the model's turn and the documents
# after it, so the hf backend computes only those (not the whole trajectory again)
ROLE = Role(NAME, build, parse, max_tokens=500, stop=STOP, closes_stop=True, cache_prompt=True)
