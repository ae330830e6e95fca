"""Answer metrics: the reference vectors (official HotpotQA script + FlashRAG) and
hand-worked cases."""

from __future__ import annotations

import pytest

from marag.metrics import cover_em, exact_match, f1_parts, f1_score, normalize_answer, score
from marag.types import iter_jsonl

FIELDS = ("em", "f1", "precision", "recall", "acc")


def test_every_reference_record_is_reproduced(qa_data):
    n = 0
    for lineno, rec in iter_jsonl(qa_data / "metric_reference.jsonl"):
        got = score(rec["prediction"], rec["golden_answers"])
        for field in FIELDS:
            assert got[field] == pytest.approx(rec[field], abs=1e-12), (lineno, field, rec, got)
        n += 1
    assert n == 960


@pytest.mark.parametrize("raw,norm", [
    ("The Eiffel Tower!", "eiffel tower"),
    ("  An  apple,  a day ", "apple day"),
    ("Theater", "theater"),  # "the" only as a whole word
    ("the-end", "theend"),  # punctuation goes first, so no article is left to strip
    ("U.S.A.", "usa"),
    ("Café “quoted”", "café “quoted”"),  # only ASCII punctuation is removed, like SQuAD
    ("", ""),
    (None, ""),
])
def test_normalize_answer(raw, norm):
    assert normalize_answer(raw) == norm


def test_exact_match_and_multiple_golden_answers():
    golds = ["Barack Obama", "Obama"]
    assert exact_match("obama.", golds) == 1.0
    assert exact_match("President Obama", golds) == 0.0
    assert exact_match("the Obama", "Obama") == 1.0  # a bare string is one golden answer
    assert cover_em("It was President Barack Obama.", golds) == 1.0
    assert cover_em("Michelle", golds) == 0.0


def test_f1_hand_computed():
    # pred tokens: paris france ; gold: paris -> p=1/2 r=1 f1=2/3
    assert f1_parts("Paris, France", ["Paris"]) == pytest.approx((2 / 3, 0.5, 1.0))
    # repeated tokens count by multiplicity: pred "new new york" vs "new york": common 2
    f1, p, r = f1_parts("new new york", "New York")
    assert (p, r) == pytest.approx((2 / 3, 1.0)) and f1 == pytest.approx(0.8)


def test_precision_and_recall_are_maximised_per_golden_answer():
    # gold 1 gives p=1/3 r=1 (f1=.5); gold 2 gives p=2/3 r=2/5 (f1=.5): each part takes its max
    f1, p, r = f1_parts("x y z", ["x", "x y m n o"])
    assert f1 == pytest.approx(0.5)
    assert p == pytest.approx(2 / 3) and r == pytest.approx(1.0)


@pytest.mark.parametrize("pred,gold,f1", [
    ("yes", "yes", 1.0),
    ("Yes.", "yes", 1.0),
    ("no", "yes", 0.0),
    ("yes", "no", 0.0),
    ("yes it was", "yes", 0.0),  # the gold is special and they differ: no partial credit
    ("yes", "yes sir", 0.0),  # the prediction is special and they differ
    ("noanswer", "no answer", 0.0),
    ("no answer", "noanswer", 0.0),
])
def test_hotpotqa_yes_no_rule(pred, gold, f1):
    assert f1_parts(pred, [gold]) == pytest.approx((f1, f1, f1))


def test_yes_no_rule_applies_per_golden_answer():
    assert f1_score("yes indeed", ["yes", "yes indeed it is"]) == pytest.approx(2 * 0.5 / 1.5)


def test_empty_and_none_predictions():
    for pred in ("", None, "  the  ", "!!!"):
        assert score(pred, ["Paris"]) == {"em": 0.0, "f1": 0.0, "precision": 0.0, "recall": 0.0, "acc": 0.0}
    # an answer that normalises to nothing matches only a golden answer that does too
    assert exact_match(None, ["The"]) == 1.0
    assert score("Paris", []) == {"em": 0.0, "f1": 0.0, "precision": 0.0, "recall": 0.0, "acc": 0.0}


def test_score_keys_and_types():
    s = score("Paris", ("Paris", "City of Paris"))
    assert list(s) == list(FIELDS)
    assert all(type(v) is float for v in s.values())
    with pytest.raises(TypeError, match="golden answers must be strings"):
        score("Paris", ["Paris", 3])


def test_score_trace_is_the_scorer_on_the_final_answer():
    from marag.metrics import score, score_trace
    from marag.types import Trace

    t = Trace("t", "q", "m", golden_answers=["Chief of Protocol"], answer="the chief of protocol")
    assert score_trace(t) == score("the chief of protocol", ["Chief of Protocol"])
    assert score_trace(t, lambda pred, gold: {"em": 1, "f1": 0.5, "acc": True}) == {
        "em": 1.0, "f1": 0.5, "acc": 1.0}
    t.answer = None
    assert score_trace(t) == {"em": 0.0, "f1": 0.0, "acc": 0.0}
