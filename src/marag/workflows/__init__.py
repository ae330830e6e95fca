"""The six methods and the entry point that runs one of them on one question.

``METHODS[name]`` is ``async def run(question: Question, ctx: Context) -> Trace``; like
:func:`run_method` it never raises for a per-question failure (the Trace says
``status="failed"`` with the error). Many questions may run concurrently in one event loop.
"""

from __future__ import annotations

from marag.types import Question, Trace
from marag.workflows.engine import Context, Method, Run, execute, method
from marag.workflows.mask import mask
from marag.workflows.planner import solve
from marag.workflows.static import llm_only, mmoa, vanilla

METHODS: dict[str, Method] = {
    "llm-only": method("llm-only", llm_only),
    "vanilla": method("vanilla", vanilla),
    "mmoa-rag": method("mmoa-rag", mmoa),
    "mao-arag": method("mao-arag", solve),
    "jade": method("jade", solve),
    "m-ask": method("m-ask", mask),
}

# Which methods need a retriever (llm-only never searches).
RETRIEVES = {name: name != "llm-only" for name in METHODS}


async def run_method(name: str, question: Question, ctx: Context, sample: int = 0) -> Trace:
    """Run method ``name`` on ``question``. An unknown name is a ValueError (a caller bug, not a
    per-question failure); everything that goes wrong while answering is in the Trace."""
    try:
        fn = METHODS[name]
    except KeyError:
        raise ValueError(f"unknown method {name!r}; choose from {sorted(METHODS)}") from None
    return await fn(question, ctx, sample)


__all__ = ["METHODS", "RETRIEVES", "Context", "Run", "execute", "run_method"]
