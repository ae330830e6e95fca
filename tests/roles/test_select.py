import pytest

from marag.roles import get_role
from marag.roles.select import allowed_text
from marag.types import Passage

DS = get_role("DS")


@pytest.mark.parametrize(
    "text,ids",
    [
        ("<id>0, 2</id>", [0, 2]),
        ("<id>2,0", [2, 0]),  # order kept, closing tag cut by the stop string
        ("Document0,Document2", [0, 2]),
        ("Document0, Document2 and Document4", [0, 2, 4]),
        ("<id>Document1</id>", [1]),
        ("<ID>Document 3, Document4</ID>", [3, 4]),
        ("<id>[0, 1]</id>", [0, 1]),
    ],
)
def test_valid_selections(text, ids):
    p = DS.parse(text, n_docs=5)
    assert (p.value, p.valid, p.reason) == (ids, True, "")


@pytest.mark.parametrize(
    "text,value,reason",
    [
        ("<id>0, 7</id>", [0], "id(s) out of range 0..4: 7"),
        ("<id>0, 2, 0</id>", [0, 2], "duplicate ids"),
        ("<id></id>", [], "no document ids"),
        ("<id>none of them</id>", [], "unexpected text in <id>: 'none of them'"),
        ("<id>0 and 2 look good</id>", [0, 2], "unexpected text in <id>: 'look good'"),
        ("Document0 says 1982", [0], "no <id> tag"),
        ("0, 2", [], "no <id> tag"),
        ("", [], "no <id> tag"),
    ],
)
def test_invalid_selections(text, value, reason):
    p = DS.parse(text, n_docs=5)
    assert (p.value, p.valid, p.reason) == (value, False, reason)


def test_build_numbers_documents_in_order():
    docs = [Passage(str(i), f"T{i}", f"text number {i}") for i in range(3)]
    msgs = DS.build(question="Which one?", docs=docs)
    last = msgs[-1]["content"]
    for i in range(3):
        assert f"Document{i}: (T{i}) text number {i}" in last
    assert "Which one?" in last
    assert msgs[2]["content"] == "<id>0, 2</id>"


def test_allowed_text_lists_ids():
    assert allowed_text(3) == ("<id>", "</id>", "Document", ",", " ", "0", "1", "2",
                               " 0", " 1", " 2")


def test_zeroshot_selector_variant_has_no_example_and_the_same_parser():
    from marag.roles.variants import VARIANTS

    docs = [Passage("a", "Canada", "Canada became independent in 1982."),
            Passage("b", "UK", "The United Kingdom")]
    msgs = VARIANTS["DS"]["zeroshot"].build(question="When?", docs=docs, rewrite="Canada 1982")
    assert [m["role"] for m in msgs] == ["system", "user"]
    assert msgs[1]["content"].startswith("Document0: (Canada)")
    assert "Canada 1982" in msgs[1]["content"]
    assert VARIANTS["DS"]["zeroshot"].parse("<id>1</id>", n_docs=2).value == [1]
