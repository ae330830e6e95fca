"""Search-o1's roles: the authors' query rule and answer format, the end marker that backends
drop put back, Reason-in-Documents' extraction and its cut of the previous reasoning, and the
layouts of what goes into the reasoning."""

from marag.roles import get_role
from marag.roles import search_r1 as r1
from marag.roles.search_o1 import (
    END_QUERY,
    NO_INFO,
    RID_ROLE,
    ROLE,
    boxed,
    build,
    build_rid,
    documents,
    parse,
    parse_rid,
    previous_steps,
    refusal,
    result,
)
from marag.roles.tags import opening_of, reclose
from marag.types import Passage


def test_both_roles_are_registered():
    assert get_role("search-o1") is ROLE and get_role("search-o1.rid") is RID_ROLE
    assert ROLE.stop == (END_QUERY,) and ROLE.closes_stop
    assert RID_ROLE.stop == () and not RID_ROLE.closes_stop


def test_a_turn_ending_in_a_query_searches_its_last_query_block():
    p = parse("think\n<|begin_search_query|> a <|end_search_query|>")
    assert p.valid and p.value == {"action": "search", "content": "a"}
    # several blocks: the last complete one (the authors' non-greedy findall, last match)
    p = parse("<|begin_search_query|>a<|end_search_query|> more <|begin_search_query|>b"
              "<|end_search_query|>\n")
    assert p.value["content"] == "b"
    # a query block not at the end of the turn does not search; a \boxed{} there answers
    p = parse("<|begin_search_query|>a<|end_search_query|> so \\boxed{Paris}")
    assert p.valid and p.value == {"action": "answer", "content": "Paris"}


def test_unreadable_turns_say_why():
    assert parse("<|begin_search_query|> <|end_search_query|>").reason == "empty search query"
    assert parse("oops <|end_search_query|>").reason == \
        "<|end_search_query|> without <|begin_search_query|>"
    assert parse("<|begin_search_query|>cut here").reason == "search query never closed"
    assert parse("It is Paris.").reason == "no search query and no \\boxed{} answer"
    assert parse("\\boxed{ }").reason == "empty \\boxed{} answer"
    assert parse(None).reason == "completion is not text"


def test_boxed_answer_as_the_authors_read_it():
    assert boxed("\\boxed{a} then \\boxed{b}") == "b"  # the last one
    assert boxed("\\boxed{\\text{Arthur's Magazine}}") == "Arthur's Magazine"
    assert boxed("\\boxed{(B)}") == "B"  # parentheses dropped, as the authors' qa mode does
    assert boxed("\\boxed{x^{2}}") == "x^{2}"  # braces balanced
    assert boxed("\\boxed{a} and \\boxed{never closed") == "a"
    assert boxed("no box") is None and boxed("\\boxed{open") is None
    assert boxed("\\boxed{" * 20_000) is None  # linear, no blow-up


def test_reclose_puts_back_the_end_marker_and_keeps_search_r1s_tags():
    assert reclose("t <|begin_search_query|> q ", ROLE.stop) == \
        "t <|begin_search_query|> q <|end_search_query|>"
    done = "<|begin_search_query|>q<|end_search_query|>"
    assert reclose(done, ROLE.stop) == done
    assert reclose("no query, \\boxed{x}", ROLE.stop) == "no query, \\boxed{x}"
    assert opening_of("<|end_search_query|>") == "<|begin_search_query|>"
    assert opening_of("</search>") == "<search>" and opening_of("\n") is None
    assert reclose("<think>t</think><search> q ", r1.ROLE.stop) == \
        "<think>t</think><search> q </search>"


def test_build_continues_the_reasoning_and_states_the_limit():
    msgs = build("Who?", "", 5)
    assert [m["role"] for m in msgs] == ["user"]
    user = msgs[0]["content"]
    assert "at most 5 searches" in user and "\\boxed{YOUR_ANSWER}" in user
    assert "<|begin_search_result|>" in user and user.rstrip().endswith("Question:\nWho?")
    msgs = build("Who?", "I think.\n<|begin_search_query|>x<|end_search_query|>")
    assert msgs[-1]["role"] == "assistant" and "at most 10 searches" in msgs[0]["content"]


def test_inserted_text_layouts():
    assert result("It began in 1844.") == \
        "\n\n<|begin_search_result|>It began in 1844.<|end_search_result|>\n\n"
    assert refusal("No more.") == "\n<|begin_search_result|>\nNo more.\n<|end_search_result|>\n"


def test_rid_extraction():
    p = parse_rid("Doc 2 helps.\n\n**Final Information**\n\nIt began\nin 1844.")
    assert p.valid and p.value == "It began in 1844."
    # the last section counts; backticks and markers are dropped
    p = parse_rid("**Final Information** a\n**Final Information**\n```\nb <|end_search_result|>\n```")
    assert p.value == "b"
    assert parse_rid("**Final Information**\n\nNo helpful information found.").value == NO_INFO
    assert parse_rid("**Final Information**: It began in 1844.").value == "It began in 1844."
    for text, why in (("just notes", "no **Final Information** section"),
                      ("**Final Information**\n \n", "nothing after **Final Information**"),
                      (None, "completion is not text")):
        p = parse_rid(text)
        assert not p.valid and p.reason == why and p.value == NO_INFO


def test_rid_prompt_holds_steps_query_and_documents_not_the_question():
    docs = [Passage("d1", "Hamlet", "A tragedy."), Passage("d2", "Ophelia", "A character.")]
    assert documents(docs) == ("**Document 1** (Title: Hamlet)\nA tragedy.\n\n"
                               "**Document 2** (Title: Ophelia)\nA character.")
    [msg] = build_rid("Step 1: I need the author.", "Hamlet author", docs)
    assert msg["role"] == "user"
    text = msg["content"]
    assert "Step 1: I need the author." in text and "Current search query: Hamlet author" in text
    assert documents(docs) in text and "**Final Information**" in text
    assert "(no documents found)" in build_rid("", "q", [])[0]["content"]


def test_previous_steps_cut_as_the_authors_cut_them():
    assert previous_steps("a\n\nb\nc") == "Step 1: a\n\nStep 2: b\n\nStep 3: c"
    lines = [f"l{i}" for i in range(1, 10)]
    lines[2] = "<|begin_search_query|>q<|end_search_query|>"
    lines[4] = "<|begin_search_result|>r<|end_search_result|>"
    cut = previous_steps("\n".join(lines)).split("\n\n")
    assert cut == ["Step 1: l1", "...", "Step 3: " + lines[2], "...", "Step 5: " + lines[4],
                   "Step 6: l6", "Step 7: l7", "Step 8: l8", "Step 9: l9"]
