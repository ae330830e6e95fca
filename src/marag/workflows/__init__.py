"""The registered methods and the entry point that runs one of them on one question.

``METHODS[name]`` is ``async def run(question: Question, ctx: Context) -> Trace``, built from
the method's record in :mod:`marag.methods` (its body is ``module:function`` under this
package); like :func:`run_method` it never raises for a per-question failure (the Trace says
``status="failed"`` with the error). Many questions may run concurrently in one event loop.
"""

from __future__ import annotations

import importlib

from marag.methods import REGISTRY
from marag.types import Question, Trace
from marag.workflows.engine import Body, Context, Method, Run, execute, method


def _body(ref: str) -> Body:
    module, _, name = ref.partition(":")
    body: Body = getattr(importlib.import_module(f"marag.workflows.{module}"), name)
    return body


METHODS: dict[str, Method] = {m.name: method(m.name, _body(m.body)) for m in REGISTRY}

# Which methods need a retriever (llm-only never searches).
RETRIEVES = {m.name: m.retrieves for m in REGISTRY}


async def run_method(name: str, question: Question, ctx: Context, sample: int = 0) -> Trace:
    """Run method ``name`` on ``question``. An unknown name is a ValueError (a caller bug, not a
    per-question failure); everything that goes wrong while answering is in the Trace."""
    try:
        fn = METHODS[name]
    except KeyError:
        raise ValueError(f"unknown method {name!r}; choose from {sorted(METHODS)}") from None
    return await fn(question, ctx, sample)


__all__ = ["METHODS", "RETRIEVES", "Context", "Run", "execute", "run_method"]
