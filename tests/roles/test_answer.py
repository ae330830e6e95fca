import pytest

from marag.roles import get_role
from marag.types import Passage

AG = get_role("AG")
AS = get_role("AS")


@pytest.mark.parametrize(
    "text,answer",
    [
        ("<answer>Paris</answer>", "Paris"),
        ("<answer> Paris", "Paris"),  # stop string removed by the backend
        ("Sure! <ANSWER>Fred\n Astaire</ANSWER> because...", "Fred Astaire"),
        ("<answer>1982</answer><answer>1983</answer>", "1982"),
    ],
)
def test_ag_valid(text, answer):
    for role in (AG, AS):
        p = role.parse(text)
        assert (p.value, p.valid) == (answer, True)


@pytest.mark.parametrize(
    "text,value,reason",
    [
        ("Paris\nis the capital", "Paris", "no <answer> tag"),
        ("   \n  ", "", "empty completion"),
        ("<answer></answer>", "", "empty <answer>"),
        ("<answer>   ", "", "empty <answer>"),
    ],
)
def test_ag_invalid(text, value, reason):
    p = AG.parse(text)
    assert (p.value, p.valid, p.reason) == (value, False, reason)


def test_ag_build_with_documents_shows_indices_titles_and_question():
    docs = [Passage("a", "Canada", "Canada became independent in 1982."),
            Passage("b", "UK", "The United Kingdom " + "word " * 500)]
    msgs = AG.build(question="When did Canada become independent?", docs=docs)
    last = msgs[-1]["content"]
    assert "Document0: (Canada) Canada became independent in 1982." in last
    assert "Document1: (UK) The United Kingdom" in last
    assert len(last.split()) < 200  # long passages are clipped
    assert "When did Canada become independent?" in last
    # zero-shot, the best-ranked document last, right before the question
    assert [m["role"] for m in msgs] == ["system", "user"]
    assert last.index("Document1: (UK)") < last.index("Document0: (Canada)") < last.index(
        "Question:")


def test_ag_variants_keep_the_old_few_shot_prompt_and_the_parser():
    from marag.roles.variants import VARIANTS

    docs = [Passage("a", "Canada", "Canada became independent in 1982."),
            Passage("b", "UK", "The United Kingdom")]
    old = VARIANTS["AG"]["fewshot"]
    msgs = old.build(question="When did Canada become independent?", docs=docs)
    assert msgs[2] == {"role": "assistant", "content": "<answer>Mount Everest</answer>"}
    last = msgs[-1]["content"]
    assert last.index("Document0: (Canada)") < last.index("Document1: (UK)")
    assert old.parse is AG.parse and old.stop == AG.stop
    assert VARIANTS["AG"]["zeroshot-best-last-open"].reply_prefix == "<answer>"


def test_an_unclosed_answer_is_its_first_line():
    p = AG.parse("<answer>Dancing on Ice: 2019\nQuestion: When is it on?\nAnswer: 2019")
    assert (p.value, p.valid) == ("Dancing on Ice: 2019", True)
    closed = AG.parse("<answer>two\nlines</answer>")
    assert closed.value == "two lines"


def test_ag_build_without_documents():
    msgs = AG.build(question="Capital of Peru?")
    assert "Document" not in "".join(m["content"] for m in msgs)
    assert msgs[-1]["content"].startswith("Question: Capital of Peru?")
    assert msgs[2]["content"] == "<answer>Paris</answer>"


def test_as_build_lists_sibling_pairs():
    msgs = AS.build(question="Heritage of the actor who first sang it?",
                    pairs=[("Who first sang it?", "Fred Astaire"), ("Heritage of Fred Astaire?", "American")])
    last = msgs[-1]["content"]
    assert "Heritage of the actor who first sang it?" in last
    assert "1. Who first sang it? -> Fred Astaire" in last
    assert "2. Heritage of Fred Astaire? -> American" in last
    assert msgs[2]["content"] == "<answer>United States</answer>"


def test_as_build_rejects_malformed_pairs():
    with pytest.raises(ValueError, match="pair"):
        AS.build(question="q", pairs=[("only one",)])


def test_decoding_limits():
    for role in (AG, AS):
        assert role.stop == ("</answer>",)
        assert role.max_tokens <= 64


def test_focus_words_keeps_the_window_around_the_question_words():
    from marag.roles.prompt import focus_words

    text = ("Early life and schooling filled many pages here. " * 4
            + "Lithium batteries use lithium cobalt oxide as the cathode mineral. "
            + "Later sections cover recycling and prices in great detail. " * 4)
    out = focus_words(text, "What mineral is in lithium batteries?", 12)
    assert "Lithium batteries use lithium cobalt oxide as the cathode mineral." in out
    assert out.startswith("... ") and out.endswith(" ...")
    assert len(out.split()) == 12 + 2  # the window and two ellipses
    # nothing matches: the start of the text, as clip_words would cut it
    assert focus_words(text, "zebra?", 5) == "Early life and schooling filled ..."
    # short texts and max_words <= 0 stay whole, whitespace folded
    assert focus_words("a  b\nc", "b", 5) == "a b c"
    assert focus_words(text, "lithium", 0) == " ".join(text.split())


def test_focused_ag_variant_cuts_each_passage_around_the_question():
    from marag.roles.variants import VARIANTS

    filler = "unrelated words about other topics " * 20
    docs = [Passage("a", "Canada", filler + "Canada became independent in 1982. " + filler)]
    q = "When did Canada become independent?"
    focused = VARIANTS["AG"]["zeroshot-best-last-focus60"].build(question=q, docs=docs)
    plain = VARIANTS["AG"]["zeroshot-best-last-60w"].build(question=q, docs=docs)
    assert "Canada became independent in 1982." in focused[-1]["content"]
    assert "1982" not in plain[-1]["content"]
