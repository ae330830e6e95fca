import pytest

from marag.roles import get_role

QR = get_role("QR")
QDS = get_role("QDS")
QDP = get_role("QDP")
MMOA = get_role("mmoa.QR")


def test_qr_valid_and_cut_closing_tag():
    assert QR.parse("<query>Fred Astaire heritage</query>") == (QR.parse("<query> Fred Astaire  heritage"))
    p = QR.parse("<query>Fred Astaire heritage")
    assert (p.value, p.valid) == ("Fred Astaire heritage", True)


@pytest.mark.parametrize(
    "text,value,reason",
    [
        ("Fred Astaire heritage\nbecause...", "Fred Astaire heritage", "no <query> tag"),
        ("", "What is his heritage?", "no <query> tag"),
        ("<query></query>", "What is his heritage?", "empty <query>"),
    ],
)
def test_qr_invalid_falls_back(text, value, reason):
    p = QR.parse(text, question=" What is his heritage? ")
    assert (p.value, p.valid, p.reason) == (value, False, reason)


def test_qr_build_shows_solved_siblings():
    msgs = QR.build(question="What is the heritage of this actor?",
                    context=[("Who first performed Something's Gotta Give?", "Fred Astaire")])
    last = msgs[-1]["content"]
    assert "What is the heritage of this actor?" in last
    assert "Who first performed Something's Gotta Give? -> Fred Astaire" in last
    assert msgs[2]["content"].startswith("<query>")
    assert "(none)" in QR.build(question="Who is he?")[-1]["content"]


@pytest.mark.parametrize("role", [QDS, QDP])
def test_split_valid(role):
    p = role.parse("<q1>Who directed Jaws?</q1>\n<q2>Where was he born?")
    assert (p.value, p.valid) == (["Who directed Jaws?", "Where was he born?"], True)
    assert role.parse("<q1>Only one</q1>").value == ["Only one"]


@pytest.mark.parametrize("role", [QDS, QDP])
def test_split_too_many_keeps_first_max(role):
    text = "".join(f"<q{i}>sub {i}</q{i}>" for i in range(1, 6))
    p = role.parse(text)
    assert (p.value, p.valid, p.reason) == (["sub 1", "sub 2", "sub 3", "sub 4"], False,
                                            "more than 4 sub-questions")
    p = role.parse(text, max_items=2)
    assert (p.value, p.valid) == (["sub 1", "sub 2"], False)


@pytest.mark.parametrize(
    "text,value,reason",
    [
        ("1. Who directed Jaws?\n2. Where was he born?", [], "no <qN> sub-question tags"),
        ("<q1></q1>", [], "empty sub-question"),
        ("<q1>A?</q1><q2>a?</q2>", ["A?"], "duplicate sub-question"),
        ("<q1>A?</q1><q2> </q2>", ["A?"], "empty sub-question"),
        ("<question>A?</question>", [], "no <qN> sub-question tags"),
    ],
)
def test_split_invalid(text, value, reason):
    p = QDS.parse(text)
    assert (p.value, p.valid, p.reason) == (value, False, reason)


def test_mmoa_qr_keeps_all_but_flags_more_than_four():
    text = "".join(f"<q{i}>query {i}</q{i}>" for i in range(1, 7))
    p = MMOA.parse(text)
    assert p.value == [f"query {i}" for i in range(1, 7)]
    assert (p.valid, p.reason) == (False, "more than 4 sub-questions")
    ok = MMOA.parse("<q1>Lovelace birth date</q1><q2>Babbage birth date")
    assert (ok.value, ok.valid) == (["Lovelace birth date", "Babbage birth date"], True)
    assert MMOA.parse("no tags").value == []


def test_split_builders_contain_question_example_and_limit():
    for role, example in ((QDS, "<q2>In which city was this director born?</q2>"),
                          (QDP, "<q2>Which country is Porto in?</q2>")):
        msgs = role.build(question="Who is older, A or B?", max_items=3)
        assert "Who is older, A or B?" in msgs[-1]["content"]
        assert "at most 3" in msgs[0]["content"]
        assert example in msgs[2]["content"]
    assert "<q1>Ada Lovelace birth date</q1>" in MMOA.build(question="x")[2]["content"]
