"""Self-RAG's reader: the checkpoints' prompt text, what a continuation says, the answer with
the reflection tokens stripped, and the authors' scores, by hand."""

import math

import pytest

from marag.roles.self_rag import (
    MISSING_LOGPROB,
    ROLE,
    answer_text,
    build,
    critique,
    is_checkpoint,
    parse,
    prompt,
    retrieval_probability,
)
from marag.types import Passage

P = Passage("d1", "Arthur's Magazine", "Arthur's Magazine (1844-1846) was an American "
            "literary periodical.")


def test_prompt_and_passage_are_the_checkpoints_text():
    assert prompt(" Who wrote Hamlet? ") == "### Instruction:\nWho wrote Hamlet?\n\n### Response:\n"
    assert prompt("Who wrote Hamlet?", "Answer briefly.") == (
        "### Instruction:\nAnswer briefly.\n\n## Input:\n\nWho wrote Hamlet?\n\n### Response:\n")
    msgs = build("Who wrote Hamlet?", P)
    assert msgs == [{"role": "user", "content": prompt("Who wrote Hamlet?")},
                    {"role": "assistant", "content": "[Retrieval]<paragraph>Arthur's Magazine\n"
                     "Arthur's Magazine (1844-1846) was an American literary periodical."
                     "</paragraph>"}]
    assert build("Q?", no_retrieval=True)[-1] == {"role": "assistant", "content": "[No Retrieval]"}
    assert [m["role"] for m in build("Q?")] == ["user"]  # the decision: the bare prompt
    assert ROLE.read("[Retrieval]", {"question": "Q?"}).value["kind"] == "decide"
    assert ROLE.read("x", {"question": "Q?", "passage": P}).value["kind"] == "evidence"
    assert ROLE.read("x", {"question": "Q?", "no_retrieval": True}).value["kind"] == "direct"


def test_answer_strips_reflection_tokens_without_gluing_words():
    text = "[Relevant]Arthur's Magazine was started first.[Fully supported][Utility:5]</s>"
    assert answer_text(text) == "Arthur's Magazine was started first."
    assert answer_text("Paris[Continue to Use Evidence]France\n") == "Paris France"
    assert answer_text(": 1844 <paragraph>x</paragraph>") == "1844 x"
    assert answer_text("[Irrelevant]") == ""


def test_a_continuation_is_read_for_its_tokens():
    p = parse("[Relevant]Arthur's Magazine[Partially supported][Utility:4]", kind="evidence")
    assert p.valid and p.value["relevance"] == "[Relevant]"
    assert p.value["support"] == "[Partially supported]" and p.value["utility"] == 4
    assert p.value["answer"] == "Arthur's Magazine"
    bad = parse("Arthur's Magazine[Utility:4]", kind="evidence")
    assert not bad.valid and "[Relevant] or [Irrelevant]" in bad.reason
    assert parse("[Irrelevant][Utility:1]", kind="evidence").reason == "no answer text"
    direct = parse("Shakespeare wrote it.[Utility:5]", kind="direct")
    assert direct.valid and direct.value["utility"] == 5 and direct.value["relevance"] is None
    assert parse("[Retrieval]", kind="decide").value["retrieve"] is True
    assert parse("Sure", kind="decide").value["retrieve"] is False
    assert parse("", kind="decide").reason == "empty completion"


def test_scores_from_the_tokens_written_when_no_probabilities():
    full = parse("[Relevant]A[Fully supported][Utility:5]", kind="evidence").value
    part = parse("[Relevant]A[Partially supported][Utility:2]", kind="evidence").value
    irr = parse("[Irrelevant]A[No support / Contradictory]", kind="evidence").value
    assert critique(full)["score"] == pytest.approx(1 + 1 + 1)
    assert critique(part)["score"] == pytest.approx(1 + 0.5 - 0.5)
    assert critique(irr)["score"] == pytest.approx(0.0)
    assert critique(full, w_use=0.5)["score"] == pytest.approx(2.5)
    # no relevance token: both "missing", as the authors' -100 each: 0.5
    assert critique(parse("A", kind="evidence").value)["relevance"] == 0.5
    assert critique(full)["from"] == "text"
    # the mean token probability is added when the sampled tokens' logprobs are there
    assert critique(full, None, [-0.1, -0.3])["seq"] == pytest.approx(math.exp(-0.2))
    assert critique(full, None, [-0.1, -0.3], seqscore=False)["seq"] == 0.0


def test_scores_from_token_probabilities_by_hand():
    lg = math.log
    top = [
        {"token": "[Relevant]", "top": {"[Relevant]": lg(0.6), "[Irrelevant]": lg(0.2),
                                        "The": lg(0.1)}},
        {"token": "\u2581Arthur", "top": {"\u2581Arthur": lg(0.9)}},
        {"token": "[Partially supported]", "top": {"[Fully supported]": lg(0.3),
                                                   "[Partially supported]": lg(0.5),
                                                   "[No support / Contradictory]": lg(0.2)}},
        {"token": "[Utility:4]", "top": {"[Utility:5]": lg(0.25), "[Utility:4]": lg(0.5),
                                         "[Utility:3]": lg(0.25)}},
    ]
    value = parse("[Relevant]Arthur[Partially supported][Utility:4]", kind="evidence").value
    c = critique(value, top, [lg(0.6), lg(0.9), lg(0.5), lg(0.5)])
    rel = 0.6 / 0.8
    sup = 0.3 + 0.5 * 0.5
    e = math.exp(MISSING_LOGPROB)
    use = (-1 * e - 0.5 * e + 0 * 0.25 + 0.5 * 0.5 + 1 * 0.25) / (1 + 2 * e)
    seq = math.exp((lg(0.6) + lg(0.9) + lg(0.5) + lg(0.5)) / 4)
    assert c["from"] == "logprobs"
    assert c["relevance"] == pytest.approx(rel) and c["support"] == pytest.approx(sup)
    assert c["utility"] == pytest.approx(use) and c["seq"] == pytest.approx(seq)
    assert c["score"] == pytest.approx(seq + rel + sup + use)
    # no support or utility token sampled anywhere: those parts are 0
    assert critique(value, top[:2])["support"] == 0.0 == critique(value, top[:2])["utility"]


def test_the_retrieval_decision_probability():
    lg = math.log
    assert retrieval_probability([{"token": "[Retrieval]",
                                   "top": {"[Retrieval]": lg(0.3), "[No Retrieval]": lg(0.6)}}]
                                 ) == pytest.approx(1 / 3)
    # neither token among the alternatives: both at -100, as the authors score it
    assert retrieval_probability([{"token": "Sure", "top": {"Sure": 0.0}}]) == pytest.approx(0.5)
    assert retrieval_probability(None) is None and retrieval_probability([]) is None


def test_tokens_too_unlikely_for_a_float_do_not_divide_by_zero():
    # vLLM / OpenAI send -9999 for -inf; exp() of it is 0.0 for every token of the group
    far = [{"token": "x", "top": {"[Retrieval]": -9999.0, "[No Retrieval]": -9999.0}}]
    assert retrieval_probability(far) == pytest.approx(0.5)
    far = [{"token": "x", "top": {"[Retrieval]": -900.0, "[No Retrieval]": -901.0}}]
    assert retrieval_probability(far) == pytest.approx(1 / (1 + math.exp(-1)))
    gone = [{"token": "x", "top": {"[Retrieval]": -math.inf, "[No Retrieval]": -math.inf}}]
    assert retrieval_probability(gone) == pytest.approx(0.5)
    top = [{"token": "[Relevant]", "top": {"[Relevant]": -9999.0, "[Irrelevant]": -9999.0}}]
    c = critique(parse("[Relevant]Arthur", kind="evidence").value, top, [-9999.0])
    assert c["relevance"] == pytest.approx(0.5) and math.isfinite(c["score"])


def test_checkpoint_names():
    for name in ("selfrag/selfrag_llama2_7b", "/models/selfrag_llama2_13b", "my-Self-RAG-7b"):
        assert is_checkpoint(name)
    for name in ("smollm2", "Qwen/Qwen2.5-7B-Instruct", "", "self/rag"):
        assert not is_checkpoint(name)
