"""Adaptive-RAG's silver labels: the simplest strategy that answered, else the dataset's bias."""

import pytest

from marag.roles.adaptive import ROLE
from marag.train.adaptive_labels import examples_adaptive, silver_labels
from marag.types import Trace


def _t(qid, f1, dataset="hotpotqa", status="ok"):
    return Trace(id=qid, question=f"question {qid}?", method="m", dataset=dataset,
                 metrics={"f1": f1}, status=status)


def test_simplest_correct_strategy_then_dataset_bias():
    runs = {"A": [_t("a", 1.0), _t("b", 0.0), _t("c", 0.0), _t("n", 0.0, "nq_open"),
                  _t("h", 0.0)],
            "B": [_t("a", 1.0), _t("b", 1.0), _t("c", 0.2), _t("n", 0.0, "nq_open"),
                  _t("h", 1.0, status="failed")],
            "C": [_t("a", 1.0), _t("b", 1.0), _t("c", 1.0), _t("n", 0.0, "nq_open"),
                  _t("h", 0.0)]}
    got = silver_labels(runs)
    assert got == {"a": ("A", "answered"), "b": ("B", "answered"), "c": ("C", "answered"),
                   "n": ("B", "dataset bias"), "h": ("C", "dataset bias")}
    assert silver_labels(runs, min_f1=0.2)["c"] == ("B", "answered")
    with pytest.raises(ValueError, match="adaptive labels are A, B, C"):
        silver_labels({"D": []})


def test_examples_are_the_classifier_prompt_with_the_label():
    examples, tally = examples_adaptive({"A": [_t("a", 1.0)], "C": [_t("b", 0.0)]}, ROLE)
    assert tally == {"A": 1, "B": 0, "C": 1, "dataset bias": 1}
    ex = {e.messages[-2]["content"]: e for e in examples}
    assert ex["Question: question a?"].target == "A</label>"  # the reply opens with <label>
    assert ex["Question: question a?"].messages[-1] == {"role": "assistant", "content": "<label>"}
