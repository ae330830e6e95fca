"""Named prompt variants per role, for choosing prompts by measurement.

``method.role_prompts: {ROLE: VARIANT}`` runs ROLE with a variant below instead of the
profile's prompt; ``benchmarks/prompts.py`` scores variants on a development split and the
results tables in ``docs/results/prompts/`` say which one each role ships with. A variant is
an ordinary :class:`~marag.roles.base.Role` with the role's name and parser, so traces,
format validity and training treat it exactly like the default.

The AG variants are a small grid over the choices that matter to a small model: whether the
worked example is shown, how documents are written and cut, where they sit in the
conversation, and whether the best document comes first or last (next to the question).
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from dataclasses import replace

from marag.config import ConfigError
from marag.roles import answer, decompose, mask, planner, rewrite, select
from marag.roles.answer import AnswerPrompt
from marag.roles.base import Messages, Role
from marag.roles.prompt import DEFAULT_DOC_WORDS, chat
from marag.types import Passage

# An example whose answer is a fact inside a passage, not a title, best passage last.
_EX_FACT = f"""Document1: (Paris) Paris is the capital and largest city of France.
Document0: (Eiffel Tower) The Eiffel Tower is a wrought-iron lattice tower in Paris. It was \
designed by Gustave Eiffel's company and completed in 1889.
Question: When was the Eiffel Tower completed?
{answer._ASK}"""


def _ag(spec: AnswerPrompt, reply_prefix: str = "") -> Role:
    return replace(answer.AG, build=spec.build, reply_prefix=reply_prefix)


def _open(role: Role, prefix: str) -> Role:
    """``role`` with its reply opened by marag with ``prefix`` (its format's first tag), which
    local backends continue (``Role.reply_prefix``); elsewhere the prompt is unchanged."""
    return replace(role, reply_prefix=prefix)


def _select_zeroshot() -> Role:
    """DS without the worked example."""
    def build(question: str, docs: Sequence[Passage], max_words: int = DEFAULT_DOC_WORDS,
              rewrite: str | None = None) -> Messages:
        return [{"role": "system", "content": select._SYSTEM},
                {"role": "user", "content": select.user_turn(question, docs, max_words, rewrite)}]

    return replace(select.ROLE, build=build)


def _planner_tools(example: bool = True) -> Role:
    """The planner prompt shipped before 2026-11-23: the tools listed, the plan rule in words."""
    def build(question: str, allow_decompose: bool = True,
              pairs: Sequence[Sequence[str]] | None = None) -> Messages:
        if pairs is not None:
            return planner.build(question, allow_decompose, pairs)
        system = planner._TOOLS if allow_decompose else planner._TOOLS_NO_SPLIT
        user = f"Question: {question.strip()}\nPlan:"
        if example:
            return chat(system, planner._EXAMPLE_IN, planner._EXAMPLE_OUT, user)
        return [{"role": "system", "content": system}, {"role": "user", "content": user}]

    return replace(planner.ROLE, build=build, reply_prefix="")


def _planner_menu_zeroshot() -> Role:
    def build(question: str, allow_decompose: bool = True,
              pairs: Sequence[Sequence[str]] | None = None) -> Messages:
        if pairs is not None:
            return planner.build(question, allow_decompose, pairs)
        system = planner._MENU if allow_decompose else planner._MENU_NO_SPLIT
        return [{"role": "system", "content": system},
                {"role": "user", "content": f"Question: {question.strip()}\nPlan:"}]

    return replace(planner.ROLE, build=build, reply_prefix="")


def _planner_two_examples() -> Role:
    """Two worked exchanges: a one-fact question retrieved, a two-fact one split."""
    def build(question: str, allow_decompose: bool = True,
              pairs: Sequence[Sequence[str]] | None = None) -> Messages:
        if pairs is not None or not allow_decompose:
            return planner.build(question, allow_decompose, pairs)
        return [
            {"role": "system", "content": planner._TOOLS},
            {"role": "user", "content": planner._EXAMPLE_IN},
            {"role": "assistant", "content": planner._EXAMPLE_OUT},
            {"role": "user", "content": "Question: Who is older, the author of Dracula or the "
                                        "author of Frankenstein?\nPlan:"},
            {"role": "assistant", "content": "<workflow>QDP</workflow>"},
            {"role": "user", "content": f"Question: {question.strip()}\nPlan:"},
        ]

    return replace(planner.ROLE, build=build, reply_prefix="")


# The same plans with the ones that retrieve first and a rule for when to skip retrieval: the
# untrained Qwen2.5-Coder-0.5B planner answered more than half of the NQ development questions
# from memory (plan AG), where it knows little.
_RETRIEVE_FIRST = ("R, AG", "QR, R, AG", "R, DS, AG", "QR, R, DS, AG", "AG")
_MENU_RETRIEVE = ("You choose how to answer a question. The plans you can choose:\n"
                  + "\n".join(f"<workflow>{p}</workflow>" for p in _RETRIEVE_FIRST) + """
<workflow>QDS</workflow> (the question needs one fact to find the next)
<workflow>QDP</workflow> (the question compares or joins independent facts)
QR rewrites the question as a search query, R retrieves documents, DS keeps the useful ones, \
AG writes the answer, QDS and QDP split the question into sub-questions.
Names, dates, places and numbers must be looked up: use a plan with R for them. Choose AG \
alone only when no document could help (arithmetic, spelling, common sense).
Reply with one plan, exactly as written above.""")


def _planner_retrieve(example: bool = True) -> Role:
    """The menu with retrieving plans first and a rule for when to skip retrieval."""
    def build(question: str, allow_decompose: bool = True,
              pairs: Sequence[Sequence[str]] | None = None) -> Messages:
        if pairs is not None or not allow_decompose:
            return planner.build(question, allow_decompose, pairs)
        user = f"Question: {question.strip()}\nPlan:"
        if example:
            return chat(_MENU_RETRIEVE, planner._EXAMPLE_IN, planner._EXAMPLE_OUT, user)
        return [{"role": "system", "content": _MENU_RETRIEVE}, {"role": "user", "content": user}]

    return replace(planner.ROLE, build=build)


VARIANTS: dict[str, dict[str, Role]] = {
    "AG": {
        # the shipped prompt until 2026-11-23: a worked example, best document first
        "fewshot": _ag(AnswerPrompt(example=True, best_last=False)),
        "zeroshot": _ag(AnswerPrompt(best_last=False)),
        "zeroshot-60w": _ag(AnswerPrompt(best_last=False, doc_words=60)),
        "zeroshot-whole": _ag(AnswerPrompt(best_last=False, doc_words=0)),
        "zeroshot-best-last": _ag(AnswerPrompt()),  # = the default
        "zeroshot-best-last-80w": _ag(AnswerPrompt(doc_words=80)),
        "zeroshot-best-last-60w": _ag(AnswerPrompt(doc_words=60)),
        "zeroshot-best-last-45w": _ag(AnswerPrompt(doc_words=45)),
        "zeroshot-best-last-focus60": _ag(AnswerPrompt(doc_words=60, focus=True)),
        "zeroshot-best-last-focus40": _ag(AnswerPrompt(doc_words=40, focus=True)),
        "zeroshot-system-docs": _ag(AnswerPrompt(best_last=False, docs_in_system=True,
                                                 doc_style="titled")),
        "fewshot-best-last": _ag(AnswerPrompt(example=True)),
        "zeroshot-best-last-open": _ag(AnswerPrompt(), "<answer>"),
        "zeroshot-open": _ag(AnswerPrompt(best_last=False), "<answer>"),
        "fact-example-best-last": _ag(AnswerPrompt(example=True, example_in=_EX_FACT,
                                                   example_out="<answer>1889</answer>")),
        "fact-example-best-last-open": _ag(AnswerPrompt(
            example=True, example_in=_EX_FACT, example_out="<answer>1889</answer>"),
            "<answer>"),
        # FlashRAG's layout (documents in the system message, "Doc 1 (Title: ...)", best
        # first), the reply opened with the tag
        "zeroshot-system-docs-open": _ag(AnswerPrompt(best_last=False, docs_in_system=True,
                                                      doc_style="titled"), "<answer>"),
    },
    "DS": {
        "example": select.ROLE,  # = the default
        "zeroshot": _select_zeroshot(),
        "open": _open(select.ROLE, "<id>"),
    },
    "QR": {"example": rewrite.ROLE, "open": _open(rewrite.ROLE, "<query>")},
    "QDS": {"example": decompose.QDS, "open": _open(decompose.QDS, "<q1>")},
    "QDP": {"example": decompose.QDP, "open": _open(decompose.QDP, "<q1>")},
    "AS": {"example": answer.AS, "open": _open(answer.AS, "<answer>")},
    "mmoa.QR": {"example": decompose.MMOA_QR, "open": _open(decompose.MMOA_QR, "<q1>")},
    "mask.plan": {"example": mask.PLAN, "open": _open(mask.PLAN, "<q1>")},
    "mask.summary": {"example": mask.SUMMARY, "open": _open(mask.SUMMARY, "<evidence>")},
    "mask.answer": {"example": mask.ANSWER,
                    "open": _open(mask.ANSWER, "<predicted_answer>")},
    "planner": {
        "menu": replace(planner.ROLE, reply_prefix=""),  # shipped until the tag was opened
        "menu-open": planner.ROLE,  # = the default
        "menu-zeroshot": _planner_menu_zeroshot(),
        "tools": _planner_tools(),  # shipped before 2026-11-23
        "two-examples": _planner_two_examples(),
        "menu-retrieve-open": _planner_retrieve(),
        "menu-retrieve-open-zeroshot": _planner_retrieve(example=False),
    },
}


def get_variant(role: str, name: str) -> Role:
    try:
        return VARIANTS[role][name]
    except KeyError:
        pass
    known = sorted(VARIANTS.get(role, {}))
    if not known:
        raise ConfigError(f"method.role_prompts.{role}: role {role!r} has no prompt variants; "
                          f"roles with variants: {', '.join(sorted(VARIANTS))}")
    close = difflib.get_close_matches(name, known, n=1)
    hint = f" (did you mean '{close[0]}'?)" if close else ""
    raise ConfigError(f"method.role_prompts.{role}: unknown variant {name!r}{hint}; "
                      f"known: {', '.join(known)}")


def check_role_prompts(role_prompts: Mapping[str, str]) -> None:
    for role, name in role_prompts.items():
        get_variant(role, name)
