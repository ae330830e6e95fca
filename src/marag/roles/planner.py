"""The planner (JADE / MAO-ARAG): picks the workflow that solves one (sub-)question.

A plan is either a decomposition (``QDS`` or ``QDP`` alone) or a solving pipeline: an
ordered subsequence of ``QR, R, DS, AG`` that ends with ``AG`` and filters (DS) only after
retrieving (R). ``RA`` (the papers' name for the retriever) is read as ``R``. The workflow
engine applies its configured fallback when a plan is invalid.

MAO-ARAG's planner also answers a node whose sub-questions are all solved (its Eq. 2 puts
``AS`` in the planner's action space; its case studies show "Planner: AS" as a turn). That
call is built with the solved ``pairs`` and the only valid plan is then ``AS`` alone.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from marag.config import DECOMPOSE_CODES, SOLVING_CODES, plan_problem
from marag.roles.base import Messages, Parsed, Role
from marag.roles.prompt import chat, render_pairs
from marag.roles.tags import find_first

_CODE = re.compile(r"[A-Za-z]+")
_KNOWN_IN_PROSE = re.compile(r"\b(QDS|QDP|QR|DS|AG|AS|RA|R)\b")
# The papers call the retriever RA (JADE Table 1, MAO-ARAG Eq. 2); marag's code for it is R.
ALIASES = {"RA": "R"}

_TOOLS = """You choose how to answer a question. Tools:
QR = rewrite the question as a short search query
R = retrieve documents
DS = keep only the useful retrieved documents
AG = write the answer
QDS = split into sub-questions that build on each other
QDP = split into independent sub-questions
A plan is QDS alone, QDP alone, or some of QR, R, DS, AG in that order, ending with AG.
Reply with the plan inside <workflow></workflow>."""

_TOOLS_NO_SPLIT = """You choose how to answer a question. Tools:
QR = rewrite the question as a short search query
R = retrieve documents
DS = keep only the useful retrieved documents
AG = write the answer
A plan is some of QR, R, DS, AG in that order, ending with AG.
Reply with the plan inside <workflow></workflow>."""

# The plans listed whole: with the tools listed and the rule in words, SmolLM2-135M wrote a
# valid plan on 26-50% of development questions; with this menu on 64-82% (70-88% with
# decoding restricted to plan codes); docs/results/prompts/README.md.
_PLANS = ("AG", "R, AG", "QR, R, AG", "R, DS, AG", "QR, R, DS, AG")
_PLAN_LINES = "\n".join(f"<workflow>{p}</workflow>" for p in _PLANS)

_MENU = f"""You choose how to answer a question. The plans you can choose:
{_PLAN_LINES}
<workflow>QDS</workflow> (the question needs one fact to find the next)
<workflow>QDP</workflow> (the question compares or joins independent facts)
QR rewrites the question as a search query, R retrieves documents, DS keeps the useful ones, \
AG writes the answer, QDS and QDP split the question into sub-questions.
Reply with one plan, exactly as written above."""

_MENU_NO_SPLIT = f"""You choose how to answer a question. The plans you can choose:
{_PLAN_LINES}
QR rewrites the question as a search query, R retrieves documents, DS keeps the useful ones, \
AG writes the answer.
Reply with one plan, exactly as written above."""

_EXAMPLE_IN = "Question: In which year did the Berlin Wall fall?\nPlan:"
# With a three-code example SmolLM2-135M mostly wrote "R, R, DS, AG" (2 of 40 plans valid on
# 20 HotpotQA + 20 NQ questions); with this two-code one, 15 of 40 were valid.
_EXAMPLE_OUT = "<workflow>R, AG</workflow>"


_SYSTEM_SOLVED = """You choose how to answer a question. It was split into sub-questions and \
all of them are answered. Tools:
AS = answer the question from its answered sub-questions
Reply with the plan inside <workflow></workflow>."""
_SOLVED_EXAMPLE_IN = """Question: Which country is the director of Jaws from?
Answered sub-questions:
1. Who directed Jaws? -> Steven Spielberg
2. Which country is Steven Spielberg from? -> United States
Plan:"""


def build(question: str, allow_decompose: bool = True,
          pairs: Sequence[Sequence[str]] | None = None) -> Messages:
    if pairs is not None:
        user = (f"Question: {question.strip()}\nAnswered sub-questions:\n"
                f"{render_pairs(pairs)}\nPlan:")
        return chat(_SYSTEM_SOLVED, _SOLVED_EXAMPLE_IN, "<workflow>AS</workflow>", user)
    system = _MENU if allow_decompose else _MENU_NO_SPLIT
    return chat(system, _EXAMPLE_IN, _EXAMPLE_OUT, f"Question: {question.strip()}\nPlan:")


def read_codes(body: str) -> list[str]:
    """Upper-cased codes of a plan body, ``RA`` read as ``R``."""
    return [ALIASES.get(c, c) for c in (w.upper() for w in _CODE.findall(body))]


def parse(text: str, allow_decompose: bool = True, summarise: bool = False,
          **_: object) -> Parsed:
    if not isinstance(text, str):
        return Parsed([], False, "completion is not text")
    element = find_first(text, "workflow")
    if element is None:
        # Salvage only known codes from prose, so ordinary words are not read as codes.
        codes = [ALIASES.get(m.group(1), m.group(1)) for m in _KNOWN_IN_PROSE.finditer(text)]
        return Parsed(codes, False, "no <workflow> tag")
    codes = read_codes(element.body)
    reason = plan_problem(codes, allow_decompose, summarise)
    return Parsed(codes, not reason, reason)


def parse_context(allow_decompose: bool = True, pairs: Sequence[Sequence[str]] | None = None,
                  **_: object) -> dict[str, object]:
    return {"allow_decompose": allow_decompose, "summarise": pairs is not None}


def allowed_text(allow_decompose: bool = True, pairs: Sequence[Sequence[str]] | None = None,
                 **_: object) -> tuple[str, ...]:
    """What a restricting backend lets the planner write: its tags, the codes this call may
    use (each also space-prefixed, as BPE vocabularies merge " R"), commas and spaces. The
    order and repetition rules are still the parser's to check."""
    if pairs is not None:
        codes: tuple[str, ...] = ("AS",)
    else:
        codes = SOLVING_CODES + (DECOMPOSE_CODES if allow_decompose else ())
    return ("<workflow>", "</workflow>", ",", " ", *codes, *(" " + c for c in codes))


# The reply is opened with the tag on backends that continue an assistant turn (hf): with
# plan-code decoding SmolLM2 then wrote a valid plan for 81 of 100 development questions
# against 79 without it (root call alone; full jade runs: 78 either way; see
# docs/results/prompts/README.md).
ROLE = Role(
    name="planner",
    build=build,
    parse=parse,
    max_tokens=24,
    stop=("</workflow>",),
    parse_context=parse_context,
    allowed_text=allowed_text,
    reply_prefix="<workflow>",
)
