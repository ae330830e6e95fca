"""The ``hf`` backend: a local transformers causal LM with dynamic batching.

Every conversation handed to ``generate`` becomes one request on an asyncio queue. A single
worker task gathers requests into a batch (closed when ``max_batch_size`` requests are in or
``batch_wait_ms`` has passed since the first) and decodes the batch in a worker thread, so
the event loop keeps accepting requests meanwhile. Many questions and parallel sub-questions
calling the backend at once therefore share forward passes.

``.module`` is the torch model and ``.tokenizer`` its tokenizer, so a trainer can update the
very weights this backend samples from. ``.model`` is the model's name (a string), as the
LLM protocol requires for traces and price tables.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from dataclasses import dataclass
from typing import Any

from marag.llm.base import LLMError, Messages, SamplingParams
from marag.types import Completion

log = logging.getLogger(__name__)


@dataclass
class _Request:
    prompt_ids: list[int]
    params: SamplingParams
    future: asyncio.Future[Completion]
    enqueued: float


class HFBackend:
    name = "hf"

    def __init__(self, model_or_path: str, *, device: str = "cpu", dtype: str = "float32",
                 max_batch_size: int = 16, batch_wait_ms: float = 5.0,
                 bf16_autocast: bool = False, model: Any = None, tokenizer: Any = None,
                 cache_dir: str | None = None) -> None:
        from marag.llm.hf_decode import BatchDecoder

        if (model is None) != (tokenizer is None):
            raise LLMError("HFBackend: pass both model and tokenizer, or neither")
        if model is None:
            from marag.llm.embedded import resolve_model

            model, tokenizer = resolve_model(model_or_path, dtype=dtype, device=device,
                                             cache_dir=cache_dir)
        if max_batch_size < 1:
            raise LLMError(f"max_batch_size must be >= 1, got {max_batch_size}")
        self.model = model_or_path
        self.module = model
        self.tokenizer = tokenizer
        self.max_batch_size = max_batch_size
        self.batch_wait = batch_wait_ms / 1000.0
        self._decoder = BatchDecoder(model, tokenizer, bf16_autocast=bf16_autocast)
        # One decode at a time even if several event loops share this backend.
        self._lock = threading.Lock()
        self._queue: asyncio.Queue[_Request] | None = None
        self._worker: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._masks: dict[tuple[str, ...], Any] = {}
        self._warned_template = False
        self.batches_run = 0  # statistics for benchmarks and tests
        self.rows_run = 0

    # ------------------------------------------------------------------ prompts

    def encode(self, messages: Messages) -> list[int]:
        """The prompt token ids for one conversation (chat template + generation prompt)."""
        tok = self.tokenizer
        if getattr(tok, "chat_template", None):
            text = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
        else:
            if not self._warned_template:
                log.warning("tokenizer of %s has no chat template; using a plain "
                            "'role: content' layout", self.model)
                self._warned_template = True
            text = "".join(f"{m['role']}: {m['content']}\n" for m in messages) + "assistant:"
        return list(tok(text, add_special_tokens=False)["input_ids"])

    def _allowed_mask(self, allowed: tuple[str, ...]) -> Any:
        if not allowed:
            return None
        mask = self._masks.get(allowed)
        if mask is None:
            import torch

            vocab = self._vocab_size()
            mask = torch.zeros(vocab, dtype=torch.bool)
            for text in allowed:
                for t in self.tokenizer(text, add_special_tokens=False)["input_ids"]:
                    mask[t] = True
            for e in self._decoder.eos_ids:
                if e < vocab:
                    mask[e] = True
            self._masks[allowed] = mask
        return mask

    def _vocab_size(self) -> int:
        emb = self.module.get_output_embeddings()
        return int(emb.weight.shape[0]) if emb is not None else int(self.module.config.vocab_size)

    # ------------------------------------------------------------------ batching

    def _ensure_worker(self) -> asyncio.Queue[_Request]:
        loop = asyncio.get_running_loop()
        if self._loop is not loop or self._worker is None or self._worker.done():
            # A new event loop (tests, asyncio.run called twice) gets its own queue and worker.
            self._loop = loop
            self._queue = asyncio.Queue()
            self._worker = loop.create_task(self._work(self._queue), name="marag-hf-batcher")
        assert self._queue is not None
        return self._queue

    async def generate(self, batch: list[Messages], params: SamplingParams) -> list[Completion]:
        if params.max_tokens < 1:
            raise LLMError(f"max_tokens must be >= 1, got {params.max_tokens}")
        queue = self._ensure_worker()
        loop = asyncio.get_running_loop()
        limit = self._decoder.max_positions
        futures = []
        for i, messages in enumerate(batch):
            ids = self.encode(messages)
            if limit and len(ids) >= limit:
                raise LLMError(f"conversation {i}: prompt has {len(ids)} tokens, model "
                               f"{self.model} accepts at most {limit - 1}")
            fut: asyncio.Future[Completion] = loop.create_future()
            queue.put_nowait(_Request(ids, params, fut, time.perf_counter()))
            futures.append(fut)
        return list(await asyncio.gather(*futures))

    async def _collect(self, queue: asyncio.Queue[_Request]) -> list[_Request]:
        first = await queue.get()
        batch = [first]
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.batch_wait
        while len(batch) < self.max_batch_size:
            if not queue.empty():
                batch.append(queue.get_nowait())
                continue
            left = deadline - loop.time()
            if left <= 0:
                break
            try:
                batch.append(await asyncio.wait_for(queue.get(), left))
            except asyncio.TimeoutError:
                break
        return [r for r in batch if not r.future.done()]

    async def _work(self, queue: asyncio.Queue[_Request]) -> None:
        while True:
            batch = await self._collect(queue)
            if not batch:
                continue
            try:
                results = await asyncio.to_thread(self._decode, batch)
            except Exception as e:  # one bad batch must not kill the worker
                log.exception("hf decode failed for a batch of %d", len(batch))
                err = LLMError(f"hf backend {self.model}: decoding failed: "
                               f"{type(e).__name__}: {e}")
                for r in batch:
                    if not r.future.done():
                        r.future.set_exception(err)
                continue
            for r, c in zip(batch, results):
                if not r.future.done():
                    r.future.set_result(c)

    def _decode(self, batch: list[_Request]) -> list[Completion]:
        from marag.llm.hf_decode import Row

        rows = [Row(r.prompt_ids, r.params, self._allowed_mask(r.params.allowed_text))
                for r in batch]
        with self._lock:
            results = self._decoder.run(rows)
        self.batches_run += 1
        self.rows_run += len(rows)
        now = time.perf_counter()
        return [
            Completion(
                text=res.text,
                finish_reason=res.finish_reason,
                prompt_tokens=len(r.prompt_ids),
                completion_tokens=len(res.token_ids),
                prompt_token_ids=list(r.prompt_ids),
                token_ids=res.token_ids,
                logprobs=res.logprobs,
                model=self.model,
                latency=now - r.enqueued,
            )
            for r, res in zip(batch, results)
        ]

    async def aclose(self) -> None:
        worker, self._worker = self._worker, None
        if worker is not None and not worker.done():
            worker.cancel()
            try:
                await worker
            except (asyncio.CancelledError, RuntimeError):
                pass
        if self._queue is not None:
            while not self._queue.empty():
                r = self._queue.get_nowait()
                if not r.future.done():
                    r.future.set_exception(LLMError("hf backend closed"))
