"""LoRA adapters loaded at run time into ``marag serve-llm`` (``/v1/load_lora_adapter``).

Each adapter is served under its own name by its own ``HFBackend`` over a copy of the base
model with the adapter merged into the weights: a request naming the adapter decodes at the
plain model's cost, and requests for the base model and for every adapter keep their own
batchers. The price is one model copy per loaded adapter, which suits the small models this
server is for (tests, a trainer's rollouts on one machine); vLLM serves many adapters over one
copy with batched LoRA kernels.

Reloading a name in place (``load_inplace``, what a trainer does after every update) copies
the newly merged weights into that adapter's existing model between two decoding runs and
drops its prefix KV, so a request in flight finishes on the old weights and the next one
starts on the new; nothing is rebuilt and no request is refused meanwhile.
"""

from __future__ import annotations

import asyncio
import copy
import logging
from pathlib import Path
from typing import TYPE_CHECKING

from marag.llm.base import LLMError

if TYPE_CHECKING:
    from marag.llm.hf_local import HFBackend

log = logging.getLogger(__name__)


class AdapterError(LLMError):
    """An adapter cannot be loaded or unloaded; ``status`` is the HTTP status to answer."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


class AdapterSet:
    """The adapters a server has loaded over one base backend, by served name."""

    def __init__(self, base: HFBackend, reserved: list[str]) -> None:
        self.base = base
        self.reserved = set(reserved)  # the base model's own names
        self.backends: dict[str, HFBackend] = {}
        self.paths: dict[str, str] = {}
        self._lock = asyncio.Lock()  # one load/unload at a time

    def get(self, name: str) -> HFBackend | None:
        return self.backends.get(name)

    async def load(self, name: str, path: str, inplace: bool = False) -> HFBackend:
        if not name:
            raise AdapterError("lora_name must not be empty")
        if name in self.reserved:
            raise AdapterError(f"{name!r} is the base model's name; pick another lora_name")
        if not (Path(path) / "adapter_config.json").is_file():
            raise AdapterError(f"no LoRA adapter at {path!r} (no adapter_config.json there)")
        async with self._lock:
            existing = self.backends.get(name)
            if existing is not None and not inplace:
                raise AdapterError(f"the LoRA adapter {name!r} is already loaded; send "
                                   "load_inplace=true to replace its weights")
            merged = await asyncio.to_thread(self._merged, path)
            if existing is not None:
                version = await asyncio.to_thread(existing.load_weights, merged.state_dict())
                log.info("reloaded LoRA adapter %s from %s (weights version %d)", name, path,
                         version)
            else:
                self.backends[name] = self._backend(name, merged)
                log.info("loaded LoRA adapter %s from %s", name, path)
            self.paths[name] = path
            return self.backends[name]

    async def unload(self, name: str) -> None:
        async with self._lock:
            backend = self.backends.pop(name, None)
            if backend is None:
                raise AdapterError(f"the LoRA adapter {name!r} is not loaded", status=404)
            self.paths.pop(name, None)
            await backend.aclose()
            log.info("unloaded LoRA adapter %s", name)

    async def aclose(self) -> None:
        for name in list(self.backends):
            await self.unload(name)

    def _merged(self, path: str) -> object:
        from marag.llm.hf_local import merge_adapter

        # the copy leaves the base model, which keeps serving, untouched
        try:
            return merge_adapter(copy.deepcopy(self.base.module), path)
        except (OSError, ValueError, RuntimeError, KeyError) as e:
            raise AdapterError(f"cannot load the LoRA adapter at {path!r}: "
                               f"{type(e).__name__}: {e}") from None

    def _backend(self, name: str, model: object) -> HFBackend:
        from marag.llm.hf_local import HFBackend

        base = self.base
        cache = base._decoder.prefix_cache
        limits = ({} if cache is None else
                  {"prefix_entries": cache.max_entries, "prefix_tokens": cache.max_tokens})
        return HFBackend(name, model=model, tokenizer=base.tokenizer,
                         max_batch_size=base.max_batch_size,
                         batch_wait_ms=base.batch_wait * 1000.0,
                         bf16_autocast=base.bf16_autocast,
                         prefix_cache=cache is not None, **limits,
                         static_cache=base.static_cache, cuda_graphs=base.cuda_graphs)
