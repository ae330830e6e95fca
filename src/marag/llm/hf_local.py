"""The ``hf`` backend: a local transformers causal LM with dynamic batching.

Every conversation handed to ``generate`` becomes one pending request. A worker task wakes
on the first, waits ``batch_wait_ms`` for company, then decodes in a worker thread (the event
loop stays free) with up to ``max_batch_size`` rows at a time; between decoding steps it
admits requests that arrived meanwhile into the running batch, and answers each request the
moment its row finishes. Many questions and parallel sub-questions calling the backend at
once therefore share forward passes, and none waits for a whole batch to end.

``.module`` is the torch model and ``.tokenizer`` its tokenizer, so a trainer can update the
very weights this backend samples from (``marag.llm.trainable.TrainableBackend``: also the
pad and EOS ids, the vocabulary size, bf16 autocast of decoding, ``weights_updated``).
``.model`` is the model's name (a string), as the LLM protocol requires for traces and price
tables.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

from marag.llm.base import LLMError, Messages, PromptError, SamplingParams
from marag.llm.chat import MIN_PREFIX, allowed_token_ids, prompt_ids, render_chat, text_ids
from marag.types import Completion

log = logging.getLogger(__name__)

PLAIN_STOP = "\nuser:"  # end of an answer in the layout used when there is no chat template


@dataclass(eq=False)  # identity semantics: requests live in the in-flight set
class _Request:
    prompt_ids: list[int]
    params: SamplingParams
    future: asyncio.Future[Completion]
    enqueued: float
    loop: asyncio.AbstractEventLoop
    prefix_len: int = 0
    on_token: Callable[[Any], None] | None = None  # streaming: called per token (any thread)
    top_logprobs: int = 0
    cancelled_at: int | None = None  # the decoder's step count when the caller gave up


@dataclass(frozen=True, slots=True)
class RequestTiming:
    """Seconds one request spent queued (until its prefill began: batch wait, rows ahead of
    it), in its prefill (shared with its group) and decoding; its prompt tokens, those whose
    KV came from the prefix cache (or were cached for it), and tokens generated."""

    wait: float
    prefill: float
    decode: float
    prompt_tokens: int
    prefix_tokens: int
    completion_tokens: int


@dataclass(frozen=True, slots=True)
class TokenStep:
    """One token of a streamed request: its id, logprob and most likely alternatives."""

    token_id: int
    logprob: float
    top: tuple[tuple[int, float], ...] = ()


class HFBackend:
    name = "hf"
    # a conversation ending in an assistant turn is continued (roles' reply_prefix)
    continues_reply = True

    def __init__(self, model_or_path: str, *, device: str = "cpu", dtype: str = "float32",
                 max_batch_size: int = 16, batch_wait_ms: float = 5.0,
                 bf16_autocast: bool = False, model: Any = None, tokenizer: Any = None,
                 cache_dir: str | None = None, prefix_cache: bool = True,
                 prefix_entries: int = 64, prefix_tokens: int = 65536,
                 adapters: list[str] | tuple[str, ...] = (),
                 static_cache: int = 0, cuda_graphs: bool = True) -> None:
        from marag.llm.hf_decode import BatchDecoder

        if (model is None) != (tokenizer is None):
            raise LLMError("HFBackend: pass both model and tokenizer, or neither")
        if model is None:
            from marag.llm.dtype import resolve_dtype
            from marag.llm.embedded import resolve_model

            # a backend decodes, so ``auto`` takes the inference rule; the factory resolves it
            # beforehand for a model that a trainer will update
            dtype = resolve_dtype(dtype, device)
            model, tokenizer = resolve_model(model_or_path, dtype=dtype, device=device,
                                             cache_dir=cache_dir)
        if max_batch_size < 1:
            raise LLMError(f"max_batch_size must be >= 1, got {max_batch_size}")
        for adapter in adapters:
            model = merge_adapter(model, adapter)
        self.adapters = tuple(adapters)  # the adapter folders merged into the weights, in order
        self.model = model_or_path
        self.module = model
        # what the weights really are (recorded in run metadata so a result can be reproduced)
        self.dtype = str(getattr(model, "dtype", dtype)).removeprefix("torch.")
        self.device = str(getattr(model, "device", device))
        self.tokenizer = tokenizer
        self.max_batch_size = max_batch_size
        self.batch_wait = batch_wait_ms / 1000.0
        # prefix_cache: reuse the KV of a conversation's leading turns (system message,
        # worked examples: identical across calls of one role) and prefill only the rest, at
        # most prefix_entries prefixes and prefix_tokens tokens of them (the KV of a token
        # costs 2 x layers x KV heads x head size values: 12 KiB in bf16, 24 in float32, for
        # Qwen2.5-0.5B);
        # switched off by the decoder for models whose cache cannot take it (sliding window).
        # static_cache: decode rows that fit in this many columns in a KV cache allocated once,
        # each step one CUDA-graph replay on CUDA (marag.llm.hf_static); 0: the growing cache
        try:
            self._decoder = BatchDecoder(model, tokenizer, bf16_autocast=bf16_autocast,
                                         prefix_cache=prefix_cache, prefix_entries=prefix_entries,
                                         prefix_tokens=prefix_tokens,
                                         static_len=static_cache, cuda_graphs=cuda_graphs)
        except PromptError as e:
            raise LLMError(f"hf backend {model_or_path}: {e}") from None
        self.static_cache = static_cache
        self.cuda_graphs = cuda_graphs
        self._decoder.abandoned = self._abandoned
        # One decode at a time even if several event loops share this backend.
        self._lock = threading.Lock()
        self._pending: deque[_Request] = deque()
        self._pending_lock = threading.Lock()
        self._in_flight: set[_Request] = set()
        self._wake: asyncio.Event | None = None
        self._worker: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._masks: dict[tuple[str, ...], Any] = {}
        # bumped by ``weights_updated``; every Completion says which weights produced it
        self.weights_version = 0
        self.batches_run = 0  # statistics for benchmarks and tests
        self.rows_run = 0
        self.abandoned_rows = 0  # rows dropped mid-decode because their caller gave up
        self.failed_rows = 0  # rows refused alone (a prompt that could not be decoded)
        # a list to profile into: every delivered request appends its RequestTiming
        # (benchmarks/e2e_profile.py sets it; None costs nothing)
        self.request_log: list[RequestTiming] | None = None
        # (decode steps between the cancel and the drop, tokens the row had) of the latest one
        self.last_abandoned: tuple[int, int] | None = None

    @property
    def threads(self) -> int:
        """torch's intra-op threads (process-wide; ``llms.*.n_threads`` sets it)."""
        import torch

        return torch.get_num_threads()

    @property
    def context_length(self) -> int:
        """Most positions (prompt + completion) the model takes; 0 when it does not say."""
        return self._decoder.max_positions

    # ------------------------------------------------------------------ prompts

    def encode(self, messages: Messages) -> list[int]:
        """The prompt token ids for one conversation (chat template + generation prompt)."""
        return prompt_ids(self.tokenizer, messages)

    def prefix_len(self, messages: Messages, ids: list[int], whole: bool = False) -> int:
        """How many leading tokens of ``ids`` are the conversation minus its last turn.

        Those tokens (system message, worked examples) repeat across calls of one role, so
        their KV is worth caching. 0 when the prefix cache is off, the conversation has one
        turn, or the rendered leading turns do not tokenise to an exact prefix of ``ids``
        (a template that rewrites earlier turns, a token merged across the boundary).
        With ``whole`` (``SamplingParams.cache_prompt``): every token but the last (one must
        be left to prefill), when that is at least ``MIN_PREFIX``.
        """
        if self._decoder.prefix_cache is None:
            return 0
        if whole:
            return len(ids) - 1 if len(ids) - 1 >= MIN_PREFIX else 0
        if len(messages) < 2:
            return 0
        try:
            head = render_chat(self.tokenizer, messages[:-1], False)
        except Exception:  # noqa: BLE001 - templates raise their own types; no prefix then
            return 0
        head_ids = text_ids(self.tokenizer, head)
        n = len(head_ids)
        if n < MIN_PREFIX or n >= len(ids) or ids[:n] != head_ids:
            return 0
        return n

    def allowed_mask(self, allowed: tuple[str, ...]) -> Any:
        """The bool vocabulary mask of decoding restricted to ``allowed`` (plus EOS), cached;
        None when unrestricted. The trainer recomputes logprobs under the same mask."""
        if not allowed:
            return None
        mask = self._masks.get(allowed)
        if mask is None:
            import torch

            vocab = self.vocab_size
            mask = torch.zeros(vocab, dtype=torch.bool, device=self.module.device)
            ids = [t for t in allowed_token_ids(self.tokenizer, allowed, self._decoder.eos_ids)
                   if t < vocab]
            mask[ids] = True
            self._masks[allowed] = mask
        return mask

    # ------------------------------------------------------------------ training
    # (marag.llm.trainable.TrainableBackend: what a trainer reads and sets)

    @property
    def vocab_size(self) -> int:
        """Rows of the output head (the config's vocab_size when it has none)."""
        emb = self.module.get_output_embeddings()
        return int(emb.weight.shape[0]) if emb is not None else int(self.module.config.vocab_size)

    @property
    def pad_id(self) -> int:
        """The token id the decoder pads batches with (a trainer pads its batches alike)."""
        return self._decoder.pad_id

    @property
    def eos_ids(self) -> frozenset[int]:
        """Every token id that ends a completion."""
        return frozenset(self._decoder.eos_ids)

    @property
    def bf16_autocast(self) -> bool:
        """Whether decoding on the CPU runs under bfloat16 autocast (``llms.*.bf16_autocast``;
        a trainer that scores in bf16 turns it on so local rollouts decode as it scores)."""
        return self._decoder.bf16_autocast

    @bf16_autocast.setter
    def bf16_autocast(self, enabled: bool) -> None:
        self._decoder.bf16_autocast = enabled

    def weights_updated(self) -> int:
        """Tell the backend that ``.module``'s weights changed (a training update, a loaded
        adapter): cached prefix KV was computed with the old weights and is dropped. Call it
        while no generation is running. Returns the new weights version."""
        with self._lock:
            return self._new_weights()

    def load_weights(self, state: Any) -> int:
        """Copy ``state`` (a state dict of ``.module``'s shape) into ``.module`` in place and
        drop the prefix KV, both between two decoding runs: no request sees half-copied
        weights or KV of the old ones. Returns the new weights version."""
        import torch

        with self._lock, torch.no_grad():
            missing, unexpected = self.module.load_state_dict(state, strict=False)
            if missing or unexpected:
                raise LLMError(f"hf backend {self.model}: new weights do not fit the model "
                               f"(missing {missing[:3]}, unexpected {unexpected[:3]})")
            return self._new_weights()

    def _new_weights(self) -> int:
        self.weights_version += 1
        if self._decoder.prefix_cache is not None:
            self._decoder.prefix_cache.clear()
        # a captured decode step sees in-place weight updates as they are; it is captured
        # again anyway (about three forward passes), in case a caller replaced modules
        self._decoder.drop_graphs()
        return self.weights_version

    # ------------------------------------------------------------------ batching

    def _ensure_worker(self) -> asyncio.Event:
        loop = asyncio.get_running_loop()
        if self._loop is not loop or self._worker is None or self._worker.done():
            # A new event loop (tests, asyncio.run called twice) gets its own worker.
            self._loop = loop
            self._wake = asyncio.Event()
            self._worker = loop.create_task(self._work(self._wake), name="marag-hf-batcher")
        assert self._wake is not None
        return self._wake

    def sampling(self, params: SamplingParams) -> SamplingParams:
        """``params`` as decoded: a model without a chat template also stops at PLAIN_STOP."""
        if params.max_tokens < 1:
            raise LLMError(f"max_tokens must be >= 1, got {params.max_tokens}")
        if not getattr(self.tokenizer, "chat_template", None) and PLAIN_STOP not in params.stop:
            # a base model in the plain layout goes on to write the next user turn itself
            params = params.replace(stop=(*params.stop, PLAIN_STOP))
        return params

    def _request(self, ids: list[int], params: SamplingParams, prefix_len: int = 0,
                 on_token: Callable[[Any], None] | None = None,
                 top_logprobs: int = 0) -> _Request:
        why = self._decoder.check(ids)
        if why is not None:  # refused alone, before it can reach a shared batch
            raise PromptError(f"model {self.model}: {why}")
        loop = asyncio.get_running_loop()
        r = _Request(ids, params, loop.create_future(), time.perf_counter(), loop, prefix_len,
                     on_token, top_logprobs)

        def note_cancel(f: asyncio.Future[Completion]) -> None:
            if f.cancelled():
                r.cancelled_at = self._decoder.steps

        r.future.add_done_callback(note_cancel)
        return r

    def _submit(self, requests: list[_Request]) -> None:
        wake = self._ensure_worker()
        with self._pending_lock:
            self._pending.extend(requests)
        wake.set()

    async def generate(self, batch: list[Messages], params: SamplingParams) -> list[Completion]:
        params = self.sampling(params)
        requests = []
        for i, messages in enumerate(batch):
            ids = self.encode(messages)
            try:
                requests.append(self._request(
                    ids, params, self.prefix_len(messages, ids, params.cache_prompt)))
            except LLMError as e:
                raise type(e)(f"conversation {i}: {e}") from None
        self._submit(requests)
        return list(await asyncio.gather(*(r.future for r in requests)))

    async def stream(self, prompt_ids: list[int], params: SamplingParams, *,
                     prefix_len: int = 0,
                     top_logprobs: int = 0) -> AsyncIterator[TokenStep | Completion]:
        """Decode one prompt, yielding a ``TokenStep`` as each token is chosen and then the
        ``Completion`` (whose text is authoritative: stop strings are cut from it).

        The request shares the batch with every other caller. Leaving the iteration early
        (``aclose``, a cancelled task) cancels the request, and its row leaves the batch at
        the next decoding step.
        """
        params = self.sampling(params)
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[TokenStep | None] = asyncio.Queue()

        def on_token(row: Any) -> None:  # decoding thread
            step = TokenStep(row.token_ids[-1], row.logprobs[-1],
                             tuple(row.tops[-1]) if row.tops else ())
            try:
                loop.call_soon_threadsafe(queue.put_nowait, step)
            except RuntimeError:  # the caller's loop is closed; nobody is reading
                pass

        r = self._request(prompt_ids, params, prefix_len, on_token, top_logprobs)
        # settled after every token was queued (both go through call_soon_threadsafe)
        r.future.add_done_callback(lambda _: queue.put_nowait(None))
        self._submit([r])
        try:
            while (step := await queue.get()) is not None:
                yield step
            yield r.future.result()
        finally:
            if not r.future.done():
                r.future.cancel()

    async def _work(self, wake: asyncio.Event) -> None:
        while True:
            await wake.wait()
            wake.clear()
            # give concurrent callers a moment to add their requests to the first batch
            if self.batch_wait > 0 and len(self._pending) < self.max_batch_size:
                await asyncio.sleep(self.batch_wait)
            try:
                await asyncio.to_thread(self._drain)
            except Exception as e:  # one bad batch must not kill the worker
                log.exception("hf decoding failed")
                err = LLMError(f"hf backend {self.model}: decoding failed: "
                               f"{type(e).__name__}: {e}")
                with self._pending_lock:
                    failed, self._in_flight = list(self._in_flight), set()
                for r in failed:
                    _resolve(r, error=err)

    def _drain(self) -> None:
        """Worker thread: decode every pending request, admitting new ones as room frees up."""
        with self._lock:
            self._decoder.run(self._admit, self._deliver, self.max_batch_size, self._fail)

    def _admit(self, n: int) -> list[Any]:
        from marag.llm.hf_decode import Row

        rows = []
        with self._pending_lock:
            while self._pending and len(rows) < n:
                r = self._pending.popleft()
                if r.future.done():  # the caller gave up (cancelled)
                    continue
                self._in_flight.add(r)
                rows.append(Row(r.prompt_ids, r.params,
                                self.allowed_mask(r.params.allowed_text), tag=r,
                                prefix_len=r.prefix_len, on_token=r.on_token,
                                top_logprobs=r.top_logprobs))
        if rows:
            self.batches_run += 1
            self.rows_run += len(rows)
        return rows

    def _abandoned(self, row: Any) -> bool:
        # results are only ever set on delivery, so a done future here means a cancelled caller
        r: _Request = row.tag
        if not r.future.done():
            return False
        with self._pending_lock:
            self._in_flight.discard(r)
        self.abandoned_rows += 1
        lag = self._decoder.steps - r.cancelled_at if r.cancelled_at is not None else 0
        self.last_abandoned = (lag, len(row.token_ids))
        return True

    def _fail(self, row: Any, error: Exception) -> None:
        """Worker thread: one row could not be decoded; only its caller gets the error."""
        r: _Request = row.tag
        with self._pending_lock:
            self._in_flight.discard(r)
        self.failed_rows += 1
        _resolve(r, error=PromptError(f"hf backend {self.model}: {error}"))

    def _deliver(self, row: Any, res: Any) -> None:
        r: _Request = row.tag
        with self._pending_lock:
            self._in_flight.discard(r)
        completion = Completion(
            text=res.text,
            finish_reason=res.finish_reason,
            prompt_tokens=len(r.prompt_ids),
            completion_tokens=len(res.token_ids),
            prompt_token_ids=list(r.prompt_ids),
            token_ids=res.token_ids,
            logprobs=res.logprobs,
            model=self.model,
            latency=time.perf_counter() - r.enqueued,
            weights_version=self.weights_version,
        )
        if self.request_log is not None:
            now = time.perf_counter()
            self.request_log.append(RequestTiming(
                wait=row.started - r.enqueued, prefill=row.first_token_at - row.started,
                decode=now - row.first_token_at, prompt_tokens=len(r.prompt_ids),
                prefix_tokens=row.prefix_len, completion_tokens=len(res.token_ids)))
        _resolve(r, result=completion)

    @property
    def decode_stats(self) -> Any:
        """The decoder's cumulative ``DecodeStats`` (where its time went)."""
        return self._decoder.stats

    async def aclose(self) -> None:
        worker, self._worker = self._worker, None
        if worker is not None and not worker.done():
            worker.cancel()
            try:
                await worker
            except (asyncio.CancelledError, RuntimeError):
                pass
        with self._pending_lock:
            left = [r for r in self._pending if r.loop is asyncio.get_running_loop()]
            for r in left:
                self._pending.remove(r)
        for r in left:
            if not r.future.done():
                r.future.set_exception(LLMError("hf backend closed"))


def merge_adapter(model: Any, adapter: str) -> Any:
    """``model`` with the LoRA adapter in folder ``adapter`` merged into its weights (so
    decoding costs what the plain model costs)."""
    from pathlib import Path

    if not (Path(adapter) / "adapter_config.json").is_file():
        raise LLMError(f"adapter {adapter}: no adapter_config.json there (expected the "
                       "'policy' folder that marag train/sft writes)")
    try:
        from peft import PeftModel
    except ImportError as e:
        raise LLMError("loading an adapter needs peft: pip install 'marag[train]'") from e
    merged = PeftModel.from_pretrained(model, adapter).merge_and_unload()
    merged.eval()
    log.info("merged adapter %s", adapter)
    return merged


def _resolve(r: _Request, *, result: Completion | None = None,
             error: BaseException | None = None) -> None:
    """Complete a request's future on its own event loop (callable from any thread)."""

    def settle() -> None:
        if r.future.done():
            return
        if error is not None:
            r.future.set_exception(error)
        else:
            r.future.set_result(result)  # type: ignore[arg-type]

    try:
        r.loop.call_soon_threadsafe(settle)
    except RuntimeError:  # the caller's loop is closed; nobody is waiting any more
        pass
