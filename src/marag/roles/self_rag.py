"""Self-RAG's reader: a checkpoint trained to write reflection tokens around its answer.

The protocol follows Self-RAG (Asai et al., ICLR 2024) for its released checkpoints
(``selfrag/selfrag_llama2_7b``, ``_13b``) and the authors' short-form inference
(AkariAsai/self-rag, ``retrieval_lm/run_short_form.py``), as FlashRAG runs it
(``SelfRAGPipeline``):

* the prompt is the checkpoints' own format, ``### Instruction:\\n{question}\\n\\n### Response:\\n``
  (with an instruction, ``{instruction}\\n\\n## Input:\\n\\n{question}`` is the instruction
  part); no system message and no worked example: the checkpoints were trained on this text;
* a passage follows it as ``[Retrieval]<paragraph>{title}\\n{text}</paragraph>`` and the model
  continues from there; without retrieval the model continues ``[No Retrieval]``;
* the reflection tokens: ``[Retrieval]`` / ``[No Retrieval]`` / ``[Continue to Use Evidence]``,
  ``[Relevant]`` / ``[Irrelevant]``, ``[Fully supported]`` / ``[Partially supported]`` /
  ``[No support / Contradictory]`` and ``[Utility:1]`` .. ``[Utility:5]``;
* a continuation is scored (:func:`critique`) as the authors score it: relevance from the first
  token's probabilities of ``[Relevant]`` and ``[Irrelevant]``; support from the first position
  whose token is a support token, ``P(full) + 0.5 P(partial)`` over the three; utility from the
  first utility token, ``sum(w_i P(i))`` with weights -1, -0.5, 0, 0.5, 1 over the five; a
  token missing from a position's alternatives counts as log-probability -100; plus, with
  ``seqscore``, the exp of the mean token log-probability. Without token probabilities (a
  backend that gives none) the tokens the model wrote are read as certain (probability 1);
* the answer is the continuation with the reflection tokens, ``<paragraph>`` tags, ``</s>`` and
  line breaks removed, and a leading ``#`` or ``:`` dropped (the authors'
  ``postprocess_answer_option_conditioned``).

The parser reads the text only; the workflow adds the token probabilities it got from the
backend (``Step.top_logprobs``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

from marag.roles.base import Messages, Parsed, Role
from marag.types import Passage

NAME = "self-rag"

RETRIEVAL, NO_RETRIEVAL, CONTINUE = "[Retrieval]", "[No Retrieval]", "[Continue to Use Evidence]"
RELEVANT, IRRELEVANT = "[Relevant]", "[Irrelevant]"
FULLY, PARTIALLY, NO_SUPPORT = ("[Fully supported]", "[Partially supported]",
                                "[No support / Contradictory]")
UTILITY = tuple(f"[Utility:{i}]" for i in range(1, 6))
PARAGRAPH_OPEN, PARAGRAPH_CLOSE = "<paragraph>", "</paragraph>"
SUPPORT = (FULLY, PARTIALLY, NO_SUPPORT)
REFLECTION = (RETRIEVAL, NO_RETRIEVAL, CONTINUE, RELEVANT, IRRELEVANT, *SUPPORT, *UTILITY)
# what the answer loses (the authors' control tokens, [Continue to Use Evidence] too, and the
# end-of-text strings a server may leave in when special tokens are kept)
_STRIPPED = (*REFLECTION, PARAGRAPH_OPEN, PARAGRAPH_CLOSE, "</s>", "<|endoftext|>")
UTILITY_WEIGHTS = (-1.0, -0.5, 0.0, 0.5, 1.0)
MISSING_LOGPROB = -100.0  # the authors' value for a token not among a position's alternatives

_CHECKPOINT = re.compile(r"self[-_ ]?rag", re.IGNORECASE)


def is_checkpoint(model: str) -> bool:
    """Whether a model name looks like a Self-RAG checkpoint (``selfrag/selfrag_llama2_7b``, a
    local folder of one): the reflection tokens exist only in those."""
    return bool(_CHECKPOINT.search(model or ""))


def prompt(question: str, instruction: str = "") -> str:
    """The checkpoints' prompt for one question."""
    q = question.strip()
    body = f"{instruction.strip()}\n\n## Input:\n\n{q}" if instruction.strip() else q
    return f"### Instruction:\n{body}\n\n### Response:\n"


def evidence(passage: Passage) -> str:
    """What follows the prompt for one retrieved passage."""
    return f"{RETRIEVAL}{PARAGRAPH_OPEN}{passage.title}\n{passage.text}{PARAGRAPH_CLOSE}"


def build(question: str, passage: Passage | None = None, no_retrieval: bool = False,
          instruction: str = "") -> Messages:
    """One user turn holding the prompt; then the passage (or ``[No Retrieval]``) as an open
    assistant turn the model continues. Served behind a chat template that passes the
    contents through unchanged, the model sees exactly the authors' text (docs/fidelity.md)."""
    messages: Messages = [{"role": "user", "content": prompt(question, instruction)}]
    if passage is not None:
        messages.append({"role": "assistant", "content": evidence(passage)})
    elif no_retrieval:
        messages.append({"role": "assistant", "content": NO_RETRIEVAL})
    return messages


def answer_text(text: str) -> str:
    """The continuation as an answer: reflection tokens, paragraph tags, end-of-text strings and
    line breaks removed (each token leaves a space, so no two words are glued), spaces folded,
    one leading ``#`` or ``:`` dropped."""
    for token in _STRIPPED:
        text = text.replace(token, " ")
    text = " ".join(text.split())
    if text[:1] in ("#", ":"):
        text = text[1:].strip()
    return text


def _first(text: str, tokens: Sequence[str]) -> str | None:
    """The token of ``tokens`` that occurs first in ``text`` (None: none does)."""
    best, at = None, len(text) + 1
    for t in tokens:
        i = text.find(t)
        if 0 <= i < at:
            best, at = t, i
    return best


def parse(text: str, kind: str = "evidence") -> Parsed:
    """What the text says. ``kind``: "decide" (the call without a passage: ``{"retrieve":
    whether [Retrieval] was written}``), "evidence" (a passage's continuation: ``relevance``,
    ``support``, ``utility`` tokens and the ``answer``) or "direct" (after ``[No Retrieval]``:
    ``utility`` and the ``answer``). Invalid: an empty reply; a continuation that does not
    open with ``[Relevant]`` or ``[Irrelevant]``; an answer with no text."""
    value: dict[str, Any] = {"kind": kind, "answer": "", "retrieve": None, "relevance": None,
                             "support": None, "utility": None}
    if not isinstance(text, str):
        return Parsed(value, False, "completion is not text")
    value["answer"] = answer_text(text)
    if kind == "decide":
        value["retrieve"] = RETRIEVAL in text
        return Parsed(value, bool(text.strip()), "" if text.strip() else "empty completion")
    value["support"] = _first(text, SUPPORT)
    ut = _first(text, UTILITY)
    value["utility"] = UTILITY.index(ut) + 1 if ut else None
    if kind == "evidence":
        head = text.lstrip()
        value["relevance"] = next((t for t in (RELEVANT, IRRELEVANT) if head.startswith(t)), None)
        if value["relevance"] is None:
            return Parsed(value, False, "the continuation does not open with [Relevant] or "
                                        "[Irrelevant]")
    if not value["answer"]:
        return Parsed(value, False, "no answer text")
    return Parsed(value)


def _context(passage: Passage | None = None, no_retrieval: bool = False,
             **_: object) -> dict[str, str]:
    return {"kind": "evidence" if passage is not None else "direct" if no_retrieval
            else "decide"}


# ---------------------------------------------------------------------- scoring (pure)

Position = Mapping[str, Any]  # {"token": sampled token text, "top": {token text: logprob}}


def _norm(token: str) -> str:
    """A token's text as a reflection token is spelt (a tokenizer's word-start mark dropped)."""
    return token.strip().lstrip("\u2581\u0120").strip()


def _logprob(pos: Position, token: str) -> float:
    for t, lp in (pos.get("top") or {}).items():
        if _norm(str(t)) == token:
            return float(lp)
    return MISSING_LOGPROB


def _dist(pos: Position, tokens: Sequence[str]) -> dict[str, float]:
    """The probabilities of ``tokens`` at one position, normalised over them. Computed relative
    to the largest log-probability, so that tokens all too unlikely for a float (vLLM and
    OpenAI send -9999 for -inf) still share the mass instead of dividing by zero; all -inf:
    equal shares."""
    lps = {t: _logprob(pos, t) for t in tokens}
    top = max(lps.values())
    if top == -math.inf:
        return {t: 1.0 / len(lps) for t in lps}
    probs = {t: math.exp(lp - top) for t, lp in lps.items()}
    total = sum(probs.values())
    return {t: p / total for t, p in probs.items()}


def _one_hot(token: str | None, tokens: Sequence[str]) -> dict[str, float] | None:
    return None if token is None else {t: float(t == token) for t in tokens}


def retrieval_probability(top: Sequence[Position] | None) -> float | None:
    """P([Retrieval]) / (P([Retrieval]) + P([No Retrieval])) at the first generated token;
    None without token probabilities."""
    if not top:
        return None
    return _dist(top[0], (RETRIEVAL, NO_RETRIEVAL))[RETRIEVAL]


def critique(value: Mapping[str, Any], top: Sequence[Position] | None = None,
             logprobs: Sequence[float] | None = None, *, w_rel: float = 1.0,
             w_sup: float = 1.0, w_use: float = 1.0, seqscore: bool = True) -> dict[str, Any]:
    """The authors' score of one continuation (the module docstring): its parts and total.
    ``value``: what :func:`parse` read (used when ``top`` is missing: the written tokens count
    as certain); ``top``: the backend's alternatives per generated token; ``logprobs``: the
    sampled tokens' log-probabilities."""
    if top:
        rel = _dist(top[0], (RELEVANT, IRRELEVANT))
        sampled = [_norm(str(p.get("token", ""))) for p in top]
        at_sup = next((i for i, t in enumerate(sampled) if t in SUPPORT), None)
        at_use = next((i for i, t in enumerate(sampled) if t in UTILITY), None)
        sup = None if at_sup is None else _dist(top[at_sup], SUPPORT)
        use = None if at_use is None else _dist(top[at_use], UTILITY)
        source = "logprobs"
    else:
        rel = _one_hot(value.get("relevance"), (RELEVANT, IRRELEVANT)) or {
            RELEVANT: 0.5, IRRELEVANT: 0.5}  # neither token: both at -100, as the authors
        sup = _one_hot(value.get("support"), SUPPORT)
        u = value.get("utility")
        use = _one_hot(UTILITY[u - 1] if isinstance(u, int) and 1 <= u <= 5 else None, UTILITY)
        source = "text"
    relevance = rel[RELEVANT]
    support = 0.0 if sup is None else sup[FULLY] + 0.5 * sup[PARTIALLY]
    utility = 0.0 if use is None else sum(w * use[t] for w, t in zip(UTILITY_WEIGHTS, UTILITY))
    seq = math.exp(sum(logprobs) / len(logprobs)) if seqscore and logprobs else 0.0
    score = seq + w_rel * relevance + w_sup * support + w_use * utility
    return {"score": score, "relevance": relevance, "support": support, "utility": utility,
            "seq": seq, "from": source}


ROLE = Role(NAME, build, parse, max_tokens=100, parse_context=_context)
