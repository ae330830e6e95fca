"""The execution-tree layout of a (possibly still running) trace.

Each node lists the steps that ran for it before its first child's first step, then its
children, then its remaining steps (an ``AS`` summary or a budget answer runs after the
children and is shown after them). Steps are referred to by their index in the step list
given, so a live view can lay out the steps in the order they arrived.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from marag.types import Node, Step
from marag.view.summary import step_summary


@dataclass(slots=True)
class NodeView:
    node: Node
    before: list[int] = field(default_factory=list)
    children: list[NodeView] = field(default_factory=list)
    after: list[int] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.node.id, "before": self.before,
                "children": [c.to_dict() for c in self.children], "after": self.after}


@dataclass(slots=True)
class TraceLayout:
    """``roots``: the node trees; ``loose``: steps of no known node (a run that failed before
    its first node, or a node not reported yet); ``summaries``: one line per step."""

    roots: list[NodeView]
    loose: list[int]
    summaries: list[str]

    def to_dict(self) -> dict[str, Any]:
        return {"roots": [r.to_dict() for r in self.roots], "loose": self.loose,
                "summaries": self.summaries}


def layout(nodes: Sequence[Node], steps: Sequence[Step],
           summaries: list[str] | None = None) -> TraceLayout:
    """Lay out ``nodes`` and ``steps``; ``summaries`` (one per step) when already computed."""
    by_id = {n.id: n for n in nodes}
    own: dict[int, list[int]] = {}
    loose: list[int] = []
    for i, st in enumerate(steps):
        (own.setdefault(st.node_id, []) if st.node_id in by_id else loose).append(i)
    first: dict[int, int] = {}

    def first_step(node: Node) -> int:
        # the first step of a node's subtree; children ids are larger, so no cycle
        if node.id not in first:
            mine = own.get(node.id, [])[:1]
            kids = [first_step(by_id[c]) for c in node.children if c in by_id and c > node.id]
            first[node.id] = min(mine + kids, default=len(steps))
        return first[node.id]

    def place(node: Node) -> NodeView:
        kids = [by_id[c] for c in node.children if c in by_id and c > node.id]
        split = min((first_step(k) for k in kids), default=len(steps))
        mine = own.get(node.id, [])
        return NodeView(node, [i for i in mine if i < split], [place(k) for k in kids],
                        [i for i in mine if i >= split])

    roots = [place(n) for n in nodes if n.parent is None or n.parent not in by_id]
    if summaries is None:
        summaries = [step_summary(s) for s in steps]
    return TraceLayout(roots, loose, summaries)
