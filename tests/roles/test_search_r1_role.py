"""Search-R1's role: the paper's action rule, its observation layout, and the closing tag
that backends drop from a reply put back."""

from marag.roles.search_r1 import ROLE, build, information, parse
from marag.roles.tags import reclose
from marag.types import Passage


def test_first_action_block_is_the_action():
    p = parse("<think>x</think><search> a </search> then <answer>b</answer>")
    assert p.valid and p.value == {"action": "search", "content": "a"}
    p = parse("<think>done</think>\n<answer> Paris </answer>")
    assert p.valid and p.value == {"action": "answer", "content": "Paris"}


def test_unreadable_actions_say_why():
    assert parse("just text").reason == "no <search> or <answer> block"
    assert parse("<answer>Par").reason == "<answer> was never closed"
    assert parse("<search></search>").reason == "empty <search> block"
    assert parse("<search>a</answer>").reason == "<search> was never closed"


def test_reclose_puts_back_the_open_block_only():
    stops = ROLE.stop
    assert reclose("<think>t</think><search> q ", stops) == "<think>t</think><search> q </search>"
    assert reclose("<search>a</search><answer> b", stops).endswith("<answer> b</answer>")
    assert reclose("<answer>a</answer>", stops) == "<answer>a</answer>"
    assert reclose("no tags", stops) == "no tags"


def test_information_block_layout():
    block = information([Passage("d1", "Hamlet", "A tragedy."), Passage("d2", "Ophelia", "B.")])
    assert block == ("\n\n<information>Doc 1(Title: Hamlet) A tragedy.\nDoc 2(Title: Ophelia) B."
                     "</information>\n\n")


def test_build_continues_the_transcript():
    assert [m["role"] for m in build("Who?")] == ["user"]
    msgs = build("Who?", "<think>a</think>")
    assert msgs[-1] == {"role": "assistant", "content": "<think>a</think>"}
    assert msgs[0]["content"].endswith("Question: Who?\n")
