"""The Python API: answer a question with any method and get its Trace.

    import marag
    trace = marag.ask("What is the capital of France?")             # jade, offline defaults
    trace = marag.ask("...", method="vanilla", config="configs/x.yaml", overrides=["method.top_k=3"])

For many questions, build one Context (backends and the retriever are then shared) and run
``marag.workflows.run_method`` concurrently, or pass ``context=`` to :func:`ask_async`.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

from marag.config import Config, ConfigError, load_config
from marag.llm.base import LLM
from marag.llm.dtype import Purpose
from marag.retrieval.base import Retriever
from marag.types import EMPTY_QUESTION, Question, Trace, is_blank
from marag.workflows import METHODS, RETRIEVES, Context, run_method

ConfigLike = Config | str | os.PathLike[str] | None


def resolve_config(config: ConfigLike = None, overrides: list[str] | None = None) -> Config:
    """A Config from a Config (overrides applied on a copy), a YAML path, or the defaults."""
    if isinstance(config, Config):
        if not overrides:
            return config
        from marag.config import apply_override, validate

        data = config.model_dump(mode="json")
        for item in overrides:
            apply_override(data, item)
        return validate(data)
    return load_config(config, overrides)


def build_context(config: Config, *, llms: dict[str, LLM] | None = None,
                  retriever: Retriever | None = None, logprobs: bool = False,
                  with_retriever: bool | None = None,
                  purpose: Purpose = "inference") -> Context:
    """Backends (one per entry of ``config.llms``, shared by every role mapped to it) and the
    retriever, unless given. ``with_retriever=None`` opens the retriever only when the
    configured method searches (llm-only does not). ``purpose="training"`` loads local models
    for a trainer (``dtype: auto`` stays float32 on CPU)."""
    if llms is None:
        from marag.llm.factory import make_llms

        llms = make_llms(config, purpose=purpose)
    if with_retriever is None:
        with_retriever = RETRIEVES.get(config.method.name, True)
    if retriever is None and with_retriever:
        from marag.retrieval import open_retriever

        retriever = open_retriever(config.retrieval)
    return Context(llms=llms, config=config, retriever=retriever, logprobs=logprobs)


async def ask_async(question: str, *, method: str | None = None, config: ConfigLike = None,
                    overrides: list[str] | None = None, context: Context | None = None,
                    **fields: Any) -> Trace:
    """Answer ``question`` with ``method`` (default: the config's, which defaults to ``jade``).

    ``fields`` fill the Question record (``id``, ``golden_answers``, ``dataset``,
    ``metadata``); with ``golden_answers`` the trace carries em/f1/acc. A given ``context`` is
    used as is (and left open); otherwise one is built from the config and closed afterwards.
    """
    unknown = set(fields) - {"id", "golden_answers", "dataset", "metadata"}
    if unknown:
        raise TypeError(f"ask() got unexpected keyword argument(s): {sorted(unknown)}")
    if context is not None and (config is not None or overrides):
        raise ValueError("pass either context= or config=/overrides=, not both")
    if is_blank(question):
        raise ValueError(f"{EMPTY_QUESTION} (ask() got {question!r})")
    q = Question(id=str(fields.get("id", "q0")), question=question,
                 golden_answers=list(fields.get("golden_answers") or []),
                 dataset=str(fields.get("dataset", "")), metadata=dict(fields.get("metadata") or {}))
    if context is not None:
        name = method or context.config.method.name
        return await run_method(_check_method(name), q, context)
    cfg = resolve_config(config, overrides)
    if method is not None and method != cfg.method.name:
        cfg = resolve_config(cfg, [f"method.name={_check_method(method)}"])
    ctx = build_context(cfg)
    try:
        return await run_method(cfg.method.name, q, ctx)
    finally:
        await ctx.aclose()


def ask(question: str, **kwargs: Any) -> Trace:
    """Blocking :func:`ask_async` (runs its own event loop; inside a running loop, await
    ``ask_async`` instead)."""
    return asyncio.run(ask_async(question, **kwargs))


def _check_method(name: str) -> str:
    if name not in METHODS:
        raise ConfigError(f"unknown method {name!r}; choose from {sorted(METHODS)}")
    return name
