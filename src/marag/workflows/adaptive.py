"""Adaptive-RAG (Jeong et al., 2024): a classifier routes each question to no retrieval
(``llm-only``), single-step retrieval (``vanilla``) or multi-step retrieval (``ircot``).

The classification is a step of its own before the chosen strategy's steps; the root node's
workflow starts with the label (``classify:B``). An unreadable label runs the single-step
strategy (``method.adaptive_fallback``) and the step is recorded invalid.
"""

from __future__ import annotations

from marag.roles.adaptive import NAME
from marag.workflows.engine import Body, Run
from marag.workflows.ircot import ircot
from marag.workflows.static import llm_only, vanilla

STRATEGIES: dict[str, Body] = {"A": llm_only, "B": vanilla, "C": ircot}


async def adaptive_rag(run: Run) -> None:
    constrained = run.restricts(NAME, "constrained_planner", "the labels A, B, C")
    p, _ = await run.call(NAME, 0, question=run.trace.question, constrained=constrained)
    label = p.value if p.valid else run.config.method.adaptive_fallback
    if not p.valid:
        run.note(f"the classifier's label was unreadable; running strategy {label}")
    await STRATEGIES[label](run)
    if run.trace.nodes:
        root = run.trace.nodes[0]
        root.workflow = [f"classify:{label}", *(root.workflow or [])]
