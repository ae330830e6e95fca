"""The execution-tree layout shared by the CLI text and the web page."""

from __future__ import annotations

from marag.types import Node, Step, Trace
from marag.view import layout, step_summary
from marag.view.text import render_trace


def _tree() -> tuple[list[Node], list[Step]]:
    nodes = [Node(0, "root?", answer="A", children=[1, 2], workflow=["QDP"], solved=True),
             Node(1, "left?", answer="L", parent=0, kind="parallel", depth=1, solved=True),
             Node(2, "right?", parent=0, kind="parallel", depth=1)]
    steps = [Step("planner", 0, parsed=["QDP"]), Step("QDP", 0, parsed=["left?", "right?"]),
             Step("planner", 1, parsed=["R", "AG"]), Step("R", 1, raw="left", doc_ids=["d1"]),
             Step("planner", 2, parsed=["AG"], valid=False, reason="bad"),
             Step("AG", 1, parsed="L"), Step("AS", 0, parsed="A"), Step("AG", 7, parsed="?")]
    return nodes, steps


def test_steps_before_and_after_children_and_loose_steps():
    nodes, steps = _tree()
    lay = layout(nodes, steps)
    (root,) = lay.roots
    assert root.before == [0, 1] and root.after == [6]
    assert [c.node.id for c in root.children] == [1, 2]
    assert root.children[0].before == [2, 3, 5] and root.children[1].before == [4]
    assert lay.loose == [7]  # node 7 is unknown (not reported yet, or a bug): still shown
    assert lay.summaries[1] == "1. left? | 2. right?" and lay.summaries[3] == "left → 1 docs"
    d = lay.to_dict()
    assert d["roots"][0]["children"][1] == {"id": 2, "before": [4], "children": [], "after": []}


def test_a_partial_tree_lays_out_like_a_prefix_of_the_final_one():
    nodes, steps = _tree()
    lay = layout(nodes[:1], steps[:2])  # live: only the root and its first steps so far
    assert lay.roots[0].before == [0, 1] and lay.roots[0].children == [] and lay.loose == []
    assert layout([], []).to_dict() == {"roots": [], "loose": [], "summaries": []}


def test_summaries_by_role():
    assert step_summary(Step("DS", parsed=[0, 2])) == "keep Document0, Document2"
    assert step_summary(Step("DS", parsed=[])) == "keep none"
    assert step_summary(Step("mask.search", parsed={"end": True})) == "<end>"
    assert step_summary(Step("mask.update", parsed={"op": "Add", "index": 3})) == "Add t3"
    assert step_summary(Step("AG", parsed="")) == "(empty)"


def test_text_renderer_follows_the_layout():
    nodes, steps = _tree()
    t = Trace("x", "root?", "jade", nodes=nodes, steps=steps, answer="A")
    text = render_trace(t)
    order = ["#0 root?", "round 0  QDP", "#1 (parallel) left?", "#2 (parallel) right?",
             "✗ invalid output: bad", "round 0  AS", "round 0  AG            ?"]
    pos = [text.index(s) for s in order]
    assert pos == sorted(pos), text
