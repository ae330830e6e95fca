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
from marag.llm.dtype import Purpose

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


def make_llm(cfg: LLMConfig, *, shared: _Shared | None = None,
             purpose: Purpose = "inference") -> LLM:
    """One backend for one ``llms.<name>`` config entry. ``purpose`` picks what ``dtype:
    auto`` means for an hf model (``training``: float32 on CPU; see ``marag.llm.dtype``)."""
    if cfg.backend == "hf":
        from marag.llm.dtype import resolve_dtype
        from marag.llm.hf_local import HFBackend
        from marag.llm.trained import resolve_adapters

        _set_threads(cfg.n_threads)
        device = process_device(cfg.device)
        dtype = resolve_dtype(cfg.dtype, device, purpose)
        adapters = resolve_adapters(cfg.adapter, cfg.model)
        key = (cfg.model, cfg.device, dtype, cfg.cache_dir, tuple(adapters))
        if not cfg.share:
            shared = None
        if shared is not None and key in shared:
            backend = shared[key]
            cache = backend._decoder.prefix_cache
            limits = (cache.max_entries, cache.max_tokens) if cache is not None else None
            if (backend.max_batch_size, backend.batch_wait, backend.static_cache,
                    backend.cuda_graphs) != (cfg.max_batch_size, cfg.batch_wait_ms / 1000.0,
                                             cfg.static_cache, cfg.cuda_graphs) or (
                    limits not in (None, (cfg.prefix_entries, cfg.prefix_tokens))):
                log.warning("hf backends for %s share one batcher; using the first entry's "
                            "max_batch_size/batch_wait_ms/static_cache/cuda_graphs/"
                            "prefix_entries/prefix_tokens", cfg.model)
            return backend
        backend = HFBackend(cfg.model, device=device, dtype=dtype,
                            max_batch_size=cfg.max_batch_size, batch_wait_ms=cfg.batch_wait_ms,
                            bf16_autocast=cfg.bf16_autocast, cache_dir=cfg.cache_dir,
                            adapters=adapters, static_cache=cfg.static_cache,
                            cuda_graphs=cfg.cuda_graphs, prefix_entries=cfg.prefix_entries,
                            prefix_tokens=cfg.prefix_tokens)
        if shared is not None:
            shared[key] = backend
        return backend
    if cfg.backend == "openai":
        from marag.llm.openai_http import OpenAIBackend

        return OpenAIBackend(cfg.base_url or OPENAI_DEFAULT_URL, cfg.model,
                             api_key_env=cfg.api_key_env, max_concurrency=cfg.max_concurrency,
                             timeout=cfg.timeout, retries=cfg.retries,
                             token_ids=cfg.token_ids, top_logprobs=cfg.top_logprobs,
                             extra_body=cfg.extra_body)
    if cfg.backend == "llamacpp":
        from marag.llm.llamacpp import LlamaCppBackend

        return LlamaCppBackend(cfg.model, n_ctx=cfg.n_ctx, n_threads=cfg.n_threads,
                               cache_dir=cfg.cache_dir)
    if cfg.backend == "scripted":
        raise ConfigError("backend 'scripted' is a test double; build ScriptedLLM in test code")
    raise ConfigError(f"unknown LLM backend {cfg.backend!r}")


def make_llms(config: Config, *, purpose: Purpose = "inference") -> dict[str, LLM]:
    """Every configured backend by its name in ``config.llms``."""
    shared: _Shared = {}
    out: dict[str, LLM] = {}
    for name, cfg in config.llms.items():
        try:
            out[name] = make_llm(cfg, shared=shared, purpose=purpose)
        except ConfigError as e:
            raise ConfigError(f"llms.{name}: {e}") from None
    return out


def llm_info(llm: LLM) -> dict[str, Any]:
    """What a run records about a backend: its kind and model, and for a local model the
    device and the dtype its weights really have (``auto`` resolved)."""
    info: dict[str, Any] = {"backend": getattr(llm, "name", type(llm).__name__),
                            "model": getattr(llm, "model", "")}
    for key in ("device", "dtype"):
        value = getattr(llm, key, None)
        if value is not None:
            info[key] = str(value)
    threads = getattr(llm, "threads", None)
    if threads:
        info["threads"] = threads
    return info
