"""The six methods and the entry point that runs one of them on one question.

``METHODS[name]`` is ``async def run(question: Question, ctx: Context) -> Trace``; like
:func:`run_method` it never raises for a per-question failure (the Trace says
``status="failed"`` with the error). Many questions may run concurrently in one event loop.
"""

from __future__ import annotations

from marag.config import METHOD_NAMES
from marag.types import Question, Trace
from marag.workflows.engine import Context, Method, Run, execute, method
from marag.workflows.mask import mask
from marag.workflows.planner import jade, mao_arag
from marag.workflows.static import llm_only, mmoa, vanilla

# The body of each method, in the order of config.METHOD_NAMES (llm-only, vanilla, mmoa-rag,
# mao-arag, jade, m-ask): jade and mao-arag share the planner loop (MAO-ARAG's planner also
# takes the AS turn) and differ in what is trained.
_BODIES = (llm_only, vanilla, mmoa, mao_arag, jade, mask)
METHODS: dict[str, Method] = {
    name: method(name, body) for name, body in zip(METHOD_NAMES, _BODIES, strict=True)
}

# Which methods need a retriever (llm-only never searches).
RETRIEVES = {name: body is not llm_only for name, body in zip(METHOD_NAMES, _BODIES, strict=True)}


async def run_method(name: str, question: Question, ctx: Context, sample: int = 0) -> Trace:
    """Run method ``name`` on ``question``. An unknown name is a ValueError (a caller bug, not a
    per-question failure); everything that goes wrong while answering is in the Trace."""
    try:
        fn = METHODS[name]
    except KeyError:
        raise ValueError(f"unknown method {name!r}; choose from {sorted(METHODS)}") from None
    return await fn(question, ctx, sample)


__all__ = ["METHODS", "RETRIEVES", "Context", "Run", "execute", "run_method"]
