from marag.roles.tags import find_all, find_first, first_line, numbered, scan, strip_tags


def test_closed_and_unclosed_elements():
    els = scan("x <Answer> Paris </answer> y <q1>a")
    assert [(e.name, e.body, e.closed) for e in els] == [("answer", "Paris", True), ("q1", "a", False)]


def test_body_stops_at_next_tag_when_closing_tag_is_missing():
    els = scan("<q1>first<q2>second</q2>")
    assert [(e.name, e.body, e.closed) for e in els] == [("q1", "first", False), ("q2", "second", True)]


def test_find_is_case_insensitive_and_ordered():
    text = "<ID>0</ID> <id>1</id>"
    assert [e.body for e in find_all(text, "id")] == ["0", "1"]
    assert find_first(text, "Id").body == "0"
    assert find_first(text, "answer") is None


def test_prose_comparisons_are_not_tags():
    assert scan("a < b and 3 > 2, <3") == []
    assert scan("") == []


def test_numbered_skips_other_names():
    els = scan("<q2>b</q2><a2>x</a2><q10>c</q10><question>z</question>")
    assert [(n, e.body) for n, e in numbered(els, "q")] == [(2, "b"), (10, "c")]
    assert [(n, e.body) for n, e in numbered(els, "a")] == [(2, "x")]


def test_huge_number_in_tag_name_is_ignored_not_an_error():
    els = scan("<q" + "9" * 5000 + ">x")
    assert numbered(els, "q") == []


def test_first_line_and_strip_tags():
    assert first_line("\n\n  Paris is it \nmore") == "Paris is it"
    assert first_line("   ") == ""
    assert strip_tags("<a>one</a>  two <end>") == "one two"
