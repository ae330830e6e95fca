"""Build LLM backends from configuration.

``make_llms`` builds every entry of ``config.llms``; ``hf`` entries naming the same model,
device, dtype and cache get the same backend object: the model is loaded once and the
requests of every role meet in one batcher (the policy and the executors of a JADE run are
one backbone). The test-only ``scripted`` backend is never built
from configuration.
"""

from __future__ import annotations

import logging
from typing import Any

from marag.config import Config, ConfigError, LLMConfig
from marag.llm.base import LLM

log = logging.getLogger(__name__)

OPENAI_DEFAULT_URL = "https://api.openai.com/v1"

# (model, device, dtype, cache_dir, adapters) -> the backend already built for it
_Shared = dict[tuple[str, str, str, str | None, tuple[str, ...]], Any]


def _set_threads(n_threads: int | None) -> None:
    if n_threads:
        import torch

        # process-wide: on an oversubscribed CPU fewer torch threads can be much faster
        torch.set_num_threads(n_threads)


def process_device(device: str) -> str:
    """``cuda`` means this process's GPU under a multi-process launcher (torchrun/accelerate
    set LOCAL_RANK), so data-parallel trainers do not all load onto the first GPU."""
    import os

    rank = os.environ.get("LOCAL_RANK")
    if device == "cuda" and rank is not None and rank.isdigit():
        return f"cuda:{rank}"
    return device


def make_llm(cfg: LLMConfig, *, shared: _Shared | None = None) -> LLM:
    """One backend for one ``llms.<name>`` config entry."""
    if cfg.backend == "hf":
        from marag.llm.hf_local import HFBackend

        _set_threads(cfg.n_threads)
        key = (cfg.model, cfg.device, cfg.dtype, cfg.cache_dir, tuple(cfg.adapter))
        if not cfg.share:
            shared = None
        if shared is not None and key in shared:
            backend = shared[key]
            if (backend.max_batch_size, backend.batch_wait) != (
                    cfg.max_batch_size, cfg.batch_wait_ms / 1000.0):
                log.warning("hf backends for %s share one batcher; using the first entry's "
                            "max_batch_size/batch_wait_ms", cfg.model)
            return backend
        backend = HFBackend(cfg.model, device=process_device(cfg.device), dtype=cfg.dtype,
                            max_batch_size=cfg.max_batch_size, batch_wait_ms=cfg.batch_wait_ms,
                            bf16_autocast=cfg.bf16_autocast, cache_dir=cfg.cache_dir,
                            adapters=cfg.adapter)
        if shared is not None:
            shared[key] = backend
        return backend
    if cfg.backend == "openai":
        from marag.llm.openai_http import OpenAIBackend

        return OpenAIBackend(cfg.base_url or OPENAI_DEFAULT_URL, cfg.model,
                             api_key_env=cfg.api_key_env, max_concurrency=cfg.max_concurrency,
                             timeout=cfg.timeout, retries=cfg.retries,
                             token_ids=cfg.token_ids)
    if cfg.backend == "llamacpp":
        from marag.llm.llamacpp import LlamaCppBackend

        return LlamaCppBackend(cfg.model, n_ctx=cfg.n_ctx, n_threads=cfg.n_threads,
                               cache_dir=cfg.cache_dir)
    if cfg.backend == "scripted":
        raise ConfigError("backend 'scripted' is a test double; build ScriptedLLM in test code")
    raise ConfigError(f"unknown LLM backend {cfg.backend!r}")


def make_llms(config: Config) -> dict[str, LLM]:
    """Every configured backend by its name in ``config.llms``."""
    shared: _Shared = {}
    out: dict[str, LLM] = {}
    for name, cfg in config.llms.items():
        try:
            out[name] = make_llm(cfg, shared=shared)
        except ConfigError as e:
            raise ConfigError(f"llms.{name}: {e}") from None
    return out
