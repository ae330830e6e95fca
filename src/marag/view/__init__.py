"""How a Trace is shown: the execution-tree layout and one-line step summaries, computed once
here and used by both the CLI text renderer (:mod:`marag.view.text`) and the web page (which
receives :meth:`TraceLayout.to_dict` from the server), so the two never disagree."""

from marag.view.layout import NodeView, TraceLayout, layout
from marag.view.summary import step_summary

__all__ = ["NodeView", "TraceLayout", "layout", "step_summary"]
