"""The ``llamacpp`` backend: a GGUF model run in-process by llama-cpp-python.

llama.cpp decodes one sequence at a time but fast on a CPU (quantised weights, no Python
per token). Calls are serialised on one worker thread because a ``Llama`` object is not
safe to use from two threads; the event loop stays free meanwhile. Optional extra:
``pip install marag[llamacpp]`` (it compiles llama.cpp; a few minutes on a small CPU).
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from marag.llm.base import LLMError, Messages, SamplingParams
from marag.types import Completion

log = logging.getLogger(__name__)


def gguf_path(model: str, cache_dir: str | os.PathLike[str] | None = None) -> Path:
    """The GGUF file for an embedded name (``smollm2``), an installed opt-in model name or a
    ``.gguf`` path."""
    from marag.llm.embedded import EMBEDDED, OPT_IN, embedded_gguf

    if model in EMBEDDED or model in OPT_IN:
        return embedded_gguf(model, cache_dir)
    path = Path(model).expanduser()
    if path.suffix != ".gguf":
        raise LLMError(f"the llamacpp backend needs a .gguf file or an embedded name "
                       f"({sorted(EMBEDDED) + sorted(OPT_IN)}), got {model!r}")
    if not path.is_file():
        raise LLMError(f"GGUF file not found: {path}")
    return path


class LlamaCppBackend:
    name = "llamacpp"

    def __init__(self, model: str, *, n_ctx: int = 4096, n_threads: int | None = None,
                 cache_dir: str | None = None, logprobs: bool = False) -> None:
        try:
            from llama_cpp import Llama
        except ImportError:
            raise LLMError("the llamacpp backend needs llama-cpp-python: "
                           "pip install 'marag[llamacpp]'") from None
        path = gguf_path(model, cache_dir)
        self.model = model
        self.path = path
        # logits for every position are needed to return logprobs; they cost memory and time,
        # so they are on only when asked for
        self.with_logprobs = logprobs
        t0 = time.perf_counter()
        try:
            self.llama = Llama(model_path=str(path), n_ctx=n_ctx, n_threads=n_threads,
                               logits_all=logprobs, verbose=False)
        except (ValueError, RuntimeError) as e:
            raise LLMError(f"llama.cpp cannot load {path}: {e}") from e
        log.info("llama.cpp loaded %s in %.1fs", path, time.perf_counter() - t0)
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="marag-llamacpp")
        self._warned: set[str] = set()

    def _warn_once(self, key: str, message: str) -> None:
        if key not in self._warned:
            self._warned.add(key)
            log.warning(message)

    async def generate(self, batch: list[Messages], params: SamplingParams) -> list[Completion]:
        if params.allowed_text:
            self._warn_once("allowed", "llamacpp backend ignores allowed_text")
        if params.min_tokens:
            self._warn_once("min_tokens", "llamacpp backend ignores min_tokens; a reply may "
                                          "end at once")
        if params.logprobs and not self.with_logprobs:
            self._warn_once("logprobs", "llamacpp backend was built without logprobs; "
                                        "completions carry none")
        loop = asyncio.get_running_loop()
        futures = [loop.run_in_executor(self._pool, self._one, m, params) for m in batch]
        return list(await asyncio.gather(*futures))

    def _one(self, messages: Messages, params: SamplingParams) -> Completion:
        t0 = time.perf_counter()
        kwargs: dict[str, Any] = {
            "messages": messages,
            "temperature": params.temperature,
            "top_p": params.top_p,
            "max_tokens": params.max_tokens,
            "stop": list(params.stop) or None,
        }
        if params.seed is not None:
            kwargs["seed"] = params.seed
        if params.logprobs and self.with_logprobs:
            kwargs["logprobs"] = True
            kwargs["top_logprobs"] = 1  # llama-cpp-python returns none without it
        try:
            out = self.llama.create_chat_completion(**kwargs)
        except (ValueError, RuntimeError) as e:
            raise LLMError(f"llama.cpp ({self.path.name}): {e}") from e
        choice = out["choices"][0]
        usage = out.get("usage") or {}
        logprobs = None
        content = (choice.get("logprobs") or {}).get("content")
        if isinstance(content, list):
            logprobs = [float(t["logprob"]) for t in content]
        return Completion(
            text=choice["message"].get("content") or "",
            finish_reason=choice.get("finish_reason") or "stop",
            prompt_tokens=int(usage.get("prompt_tokens", 0)),
            completion_tokens=int(usage.get("completion_tokens", 0)),
            logprobs=logprobs,
            model=self.model,
            latency=time.perf_counter() - t0,
        )

    async def aclose(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
