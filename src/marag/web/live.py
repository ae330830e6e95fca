"""A running question as a stream of events for the web page.

:class:`LiveQuestion` is a :class:`~marag.workflows.engine.RunListener`: each step and node
change is turned into a JSON event at once (the engine's objects keep changing afterwards)
together with the current tree layout, computed by :mod:`marag.view` exactly as for the
final trace. Events wait in a queue until the HTTP response sends them.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from marag.types import Node, Step, Trace
from marag.view import layout, step_summary


def sse(event: str, data: dict[str, Any]) -> bytes:
    """One server-sent event (JSON data on one line)."""
    return f"event: {event}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n".encode()


def trace_payload(trace: Trace) -> dict[str, Any]:
    """A finished trace with its layout, as the page draws it."""
    return {"trace": trace.to_dict(), "layout": layout(trace.nodes, trace.steps).to_dict()}


class LiveQuestion:
    """Collects one question's progress; ``queue`` holds encoded events, ``None`` ends it."""

    def __init__(self) -> None:
        self.queue: asyncio.Queue[bytes | None] = asyncio.Queue()
        self.steps: list[Step] = []
        self.summaries: list[str] = []
        self.nodes: dict[int, Node] = {}

    def _layout(self) -> dict[str, Any]:
        nodes = [self.nodes[k] for k in sorted(self.nodes)]
        lay = layout(nodes, self.steps, summaries=self.summaries).to_dict()
        del lay["summaries"]  # sent once with each step instead of again with every event
        return lay

    def on_step(self, step: Step) -> None:
        self.steps.append(step)
        summary = step_summary(step)
        self.summaries.append(summary)
        self.queue.put_nowait(sse("step", {"index": len(self.steps) - 1, "step": step.to_dict(),
                                           "summary": summary, "layout": self._layout()}))

    def on_node(self, node: Node) -> None:
        # a copy: the workflow keeps mutating the engine's node after this call
        snap = Node.from_dict(node.to_dict())
        self.nodes[node.id] = snap
        self.queue.put_nowait(sse("node", {"node": snap.to_dict(), "layout": self._layout()}))

    def finish(self, event: str, data: dict[str, Any]) -> None:
        self.queue.put_nowait(sse(event, data))
        self.queue.put_nowait(None)
