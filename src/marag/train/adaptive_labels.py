"""Adaptive-RAG's silver labels (Jeong et al., 2024, S3.2): which strategy a question needs,
read off marag's own runs of the three strategies on the training questions.

A question's label is the *simplest* strategy that answered it correctly: ``A`` (no
retrieval, an ``llm-only`` run) before ``B`` (single-step, ``vanilla``) before ``C``
(multi-step, ``ircot``); "correctly" is F1 >= ``min_f1`` (``sft.min_f1``; 1.0 = the exact
answer). A question no strategy answered takes its dataset's bias, as the paper does:
``B`` for a single-hop dataset, ``C`` for a multi-hop one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from marag.roles.base import Role
from marag.train.sft import Example, role_example
from marag.types import Trace

ORDER = ("A", "B", "C")
SINGLE_HOP = frozenset({"nq", "nq_open", "popqa", "triviaqa", "squad", "ambigqa", "webq"})


def silver_labels(runs: Mapping[str, Sequence[Trace]], min_f1: float = 1.0
                  ) -> dict[str, tuple[str, str]]:
    """question id -> (label, why): ``"answered"`` or ``"dataset bias"``. ``runs`` maps a
    label (A, B, C) to the traces of the strategy's run."""
    unknown = sorted(set(runs) - set(ORDER))
    if unknown:
        raise ValueError(f"adaptive labels are {', '.join(ORDER)}; got {unknown}")
    first: dict[str, Trace] = {}
    correct: dict[str, str] = {}
    for label in ORDER:
        for t in runs.get(label, ()):
            first.setdefault(t.id, t)
            if t.id in correct or t.status == "failed":
                continue
            if float(t.metrics.get("f1", 0.0)) >= min_f1:
                correct[t.id] = label
    out = {}
    for qid, t in first.items():
        if qid in correct:
            out[qid] = (correct[qid], "answered")
        else:
            single = t.dataset.lower() in SINGLE_HOP
            out[qid] = ("B" if single else "C", "dataset bias")
    return out


def examples_adaptive(runs: Mapping[str, Sequence[Trace]], classifier: Role,
                      min_f1: float = 1.0) -> tuple[list[Example], dict[str, int]]:
    """The classifier's examples and a tally (per label, and how many came from the bias)."""
    labels = silver_labels(runs, min_f1)
    questions = {t.id: t.question for traces in runs.values() for t in traces}
    tally = {k: 0 for k in ORDER} | {"dataset bias": 0}
    out = []
    for qid, (label, why) in labels.items():
        tally[label] += 1
        tally["dataset bias"] += why == "dataset bias"
        out.append(role_example(classifier, f"<label>{label}</label>", question=questions[qid]))
    return out, tally
