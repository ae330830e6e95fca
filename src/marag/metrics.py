"""Answer metrics: SQuAD normalisation, exact match, token F1 (+ precision/recall), cover-EM.

All scores are the maximum over the golden answers, and agree with the official HotpotQA
evaluation script and FlashRAG's ``ExactMatch`` / ``F1_Score`` / ``Sub_ExactMatch``:

- ``normalize_answer``: lowercase, drop ASCII punctuation, drop the articles a/an/the, collapse
  whitespace.
- token F1 follows HotpotQA's rule: when either the normalised prediction or the normalised
  golden answer is ``yes``, ``no`` or ``noanswer`` and the two differ, that golden answer
  scores 0 for F1, precision and recall (a "yes" sharing no token with "no" is obvious, but
  "yes it was" would otherwise get partial credit against "yes").
- precision and recall are each maximised over the golden answers on their own, as FlashRAG
  does; they need not come from the golden answer with the best F1. (With one golden answer, as
  in HotpotQA, the two readings coincide, and on all 960 shared reference records they agree.)
- ``cover_em`` (the papers' "Acc"): some normalised golden answer is a substring of the
  normalised prediction.

A ``None`` prediction scores as the empty string. Pure functions, no state.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from marag.types import Trace

_PUNCTUATION = str.maketrans("", "", string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")
_SPECIAL = frozenset({"yes", "no", "noanswer"})

Golds = str | Iterable[str]


def normalize_answer(s: str | None) -> str:
    """SQuAD answer normalisation (the order matters: punctuation goes before articles,
    so "the-end" -> "theend" keeps its article while "the end" -> "end" loses it)."""
    if s is None:
        return ""
    text = s.lower().translate(_PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def _golds(golds: Golds) -> list[str]:
    if isinstance(golds, str):
        return [golds]
    out = [g for g in golds]
    for g in out:
        if not isinstance(g, str):
            raise TypeError(f"golden answers must be strings, got {type(g).__name__}: {g!r}")
    return out


def _token_prf(pred_norm: str, gold_norm: str) -> tuple[float, float, float]:
    if (pred_norm in _SPECIAL or gold_norm in _SPECIAL) and pred_norm != gold_norm:
        return 0.0, 0.0, 0.0
    pred_tokens = pred_norm.split()
    gold_tokens = gold_norm.split()
    same = sum((Counter(pred_tokens) & Counter(gold_tokens)).values())
    if same == 0:
        return 0.0, 0.0, 0.0
    precision = same / len(pred_tokens)
    recall = same / len(gold_tokens)
    return 2 * precision * recall / (precision + recall), precision, recall


def f1_parts(pred: str | None, golds: Golds) -> tuple[float, float, float]:
    """``(f1, precision, recall)``, each the maximum over the golden answers."""
    p = normalize_answer(pred)
    best = [0.0, 0.0, 0.0]
    for gold in _golds(golds):
        for i, v in enumerate(_token_prf(p, normalize_answer(gold))):
            best[i] = max(best[i], v)
    return best[0], best[1], best[2]


def f1_score(pred: str | None, golds: Golds) -> float:
    return f1_parts(pred, golds)[0]


def exact_match(pred: str | None, golds: Golds) -> float:
    p = normalize_answer(pred)
    return float(any(p == normalize_answer(g) for g in _golds(golds)))


def cover_em(pred: str | None, golds: Golds) -> float:
    """Accuracy as the papers report it: a normalised golden answer occurs in the prediction."""
    p = normalize_answer(pred)
    return float(any(normalize_answer(g) in p for g in _golds(golds)))


def score(pred: str | None, golds: Golds) -> dict[str, float]:
    """All answer metrics at once: ``em``, ``f1``, ``precision``, ``recall``, ``acc``."""
    golds = _golds(golds)
    f1, precision, recall = f1_parts(pred, golds)
    return {
        "em": exact_match(pred, golds),
        "f1": f1,
        "precision": precision,
        "recall": recall,
        "acc": cover_em(pred, golds),
    }


# The scores every summary reports; a scorer may return more (``score`` adds precision/recall).
ANSWER_METRICS = ("em", "f1", "acc")
Scorer = Callable[[str, list[str]], dict[str, float]]


def score_trace(trace: Trace, scorer: Scorer | None = None) -> dict[str, float]:
    """The scores of a trace's final answer against its golden answers (``score`` unless another
    scorer is given). A trace without an answer scores zero on ``ANSWER_METRICS``. The one place
    a trace is scored: the engine, the evaluation runner and summaries all call it."""
    if trace.answer is None:
        return {m: 0.0 for m in ANSWER_METRICS}
    scores = (scorer or score)(trace.answer, list(trace.golden_answers))
    return {k: float(v) for k, v in scores.items()}
