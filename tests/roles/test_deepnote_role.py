"""DeepNote's five roles: what each prompt shows (the question, the documents, the best note,
the earlier queries, the two notes to compare) and how each reply is read, malformed ones
recorded invalid with their reason."""

from marag.roles import get_role
from marag.roles.deepnote import (
    ANSWER,
    COMPARE,
    INIT,
    QUERY,
    UPDATE,
    build_compare,
    build_init,
    build_query,
    build_update,
    parse_compare,
    parse_note,
    parse_query,
)
from marag.types import Passage

Q = "Which magazine was started first, Arthur's Magazine or First for Women?"
DOCS = [Passage("d1", "Arthur's Magazine", "Arthur's Magazine (1844-1846) was an American "
                "literary periodical published in Philadelphia."),
        Passage("d2", "First for Women", "First for Women is a woman's magazine published by "
                "Bauer Media Group in the USA. The magazine was started in 1989.")]
NOTE = "Arthur's Magazine was an American literary periodical published from 1844 to 1846."


def test_every_role_is_registered_with_its_stop():
    assert get_role(INIT).stop == ("</note>",) == get_role(UPDATE).stop
    assert get_role(COMPARE).stop == ("</better>",)
    assert get_role(ANSWER).stop == ("</answer>",)
    assert get_role(QUERY).stop == ()  # one or two queries: no stop after the first


def test_init_shows_the_question_and_the_documents():
    msgs = build_init(Q, DOCS)
    assert [m["role"] for m in msgs] == ["system", "user", "assistant", "user"]
    assert msgs[2]["content"].startswith("<note>")  # the worked example's reply
    user = msgs[-1]["content"]
    assert user.startswith(f"Question: {Q}\nDocument0: (Arthur's Magazine) Arthur's Magazine")
    assert "Document1: (First for Women)" in user and user.endswith("<note></note>:")


def test_query_shows_the_best_note_and_the_earlier_queries():
    user = build_query(Q, NOTE, ["Arthur's Magazine founding", "First for Women start"])[-1]
    assert user["content"] == (
        f"Question: {Q}\nNote: {NOTE}\nEarlier searches: Arthur's Magazine founding; "
        "First for Women start\nNew queries, each inside <query></query>:")
    assert "Earlier searches: none\n" in build_query(Q, "")[-1]["content"]
    assert "Note: (empty)" in build_query(Q, "")[-1]["content"]


def test_update_shows_the_note_and_the_new_documents():
    user = build_update(Q, NOTE, DOCS[1:])[-1]["content"]
    assert user.startswith(f"Question: {Q}\nNote: {NOTE}\nNew documents:\n"
                           "Document0: (First for Women) First for Women is")
    assert "(no documents)" in build_update(Q, NOTE, [])[-1]["content"]


def test_compare_shows_the_best_note_first():
    user = build_compare(Q, NOTE, NOTE + " First for Women was started in 1989.")[-1]["content"]
    assert user.index("Note 1: Arthur's") < user.index("Note 2: Arthur's")
    assert "Note 2: " + NOTE + " First for Women was started in 1989." in user


def test_notes_are_read_from_their_tag():
    assert parse_note(f"<note>{NOTE}\n</note>").value == NOTE
    assert parse_note("<note> spread\n over  lines").value == "spread over lines"  # stop cut
    p = parse_note(f"Here is the note: {NOTE}")
    assert not p.valid and p.value == f"Here is the note: {NOTE}" and "no <note>" in p.reason
    assert parse_note("<note> </note>").reason == "empty <note>"
    assert parse_note("   ").reason == "empty completion" and parse_note("").value == ""


def test_queries_are_read_in_order_and_repeats_are_flagged():
    p = parse_query("<query>Arthur's Magazine founded</query>\n<query>First for Women "
                    "1989</query>")
    assert p.valid and p.value == ["Arthur's Magazine founded", "First for Women 1989"]
    # duplicates inside one reply fold; more than three are cut
    many = "".join(f"<query>q{i}</query>" for i in (1, 1, 2, 3, 4))
    assert parse_query(many).value == ["q1", "q2", "q3"]
    rep = parse_query("<query>arthur's magazine FOUNDED</query>",
                      history=["Arthur's Magazine founded"])
    assert not rep.valid and rep.value == ["arthur's magazine FOUNDED"]
    assert "repeats an earlier search" in rep.reason
    bare = parse_query("Arthur's Magazine founding year\nand more")
    assert bare.value == ["Arthur's Magazine founding year"] and not bare.valid
    assert parse_query("<query> </query>").value == [] and not parse_query("").valid


def test_the_comparison_keeps_the_old_note_unless_it_reads_yes():
    assert parse_compare("<better>yes</better>").value is True
    assert parse_compare("<better> True.</better>").value is True
    assert parse_compare("<better>no").value is False and parse_compare("<better>no").valid
    bare = parse_compare("Yes.")
    assert bare.value is True and not bare.valid and "bare reply" in bare.reason
    for junk in ("<better>maybe</better>", "Note 2 adds a date, so yes it is better", ""):
        p = parse_compare(junk)
        assert p.value is False and not p.valid and p.reason
