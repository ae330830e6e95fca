"""Fixed-slot decoding for the local decoder: a KV cache allocated once, and on CUDA the
decode step replayed as a captured CUDA graph.

Why: on a GPU a 0.5B model's decode step is launch-bound (hundreds of small kernels a step:
the whole growing-cache step took 54 ms at 16 rows on an H100, transformers' forward alone
~20 ms whatever the batch, BENCHMARKS.md), and the growing cache of ``hf_decode`` changes
every tensor's shape each step, so nothing can be captured. Here every shape is fixed:

- ``SlotCache``: per layer, keys and values of ``[slots, kv_heads, length, head_dim]``. A row
  owns one slot; its tokens sit at columns ``0..n-1`` with no padding, so a token's column is
  its position id, and the step writes each slot's new key/value at its own column
  (``write``). A finished row frees its slot at once; a new row takes a free slot between
  steps (its prompt is prefilled by ``hf_decode`` as before and its real columns copied in),
  so continuous batching survives the fixed shapes.
- ``SlotStep``: the step's inputs (token ids, position ids, write columns, a 4-D additive
  mask ``[slots, 1, 1, length]``) and output logits live in fixed buffers; the model is called
  with the 4-D mask, which transformers passes to attention as it is. Free slots run along
  (writing column 0, which their mask shows them, so their logits stay finite) and are not
  read. On CUDA, the first step captures the whole step (mask update, forward, logits copy)
  in a ``torch.cuda.CUDAGraph`` and every later step is one replay; elsewhere the same step
  runs eagerly, which is how it is tested on a CPU.

The price: every step attends over all ``length`` columns of all slots, so ``length`` should
be near the longest prompt plus answer of a run, not the model's context. Rows that would
not fit (prompt plus ``max_tokens`` beyond ``length``) are decoded by the growing cache.
"""

from __future__ import annotations

import logging
from typing import Any

import torch

from marag.llm.cache_kwarg import cache_kwarg

log = logging.getLogger(__name__)


def _text_config(model: Any) -> Any:
    cfg = model.config
    return cfg.get_text_config() if hasattr(cfg, "get_text_config") else cfg


def static_supported(model: Any) -> str | None:
    """Why ``model`` cannot decode in fixed slots (None: it can): every layer must be plain
    full attention over a growing key/value store."""
    cfg = _text_config(model)
    types = getattr(cfg, "layer_types", None) or ["full_attention"]
    if any(t != "full_attention" for t in types):
        return f"its layers are not all full attention ({sorted(set(types))})"
    if getattr(cfg, "sliding_window", None) and getattr(cfg, "use_sliding_window", False):
        return "it uses a sliding window"
    if getattr(cfg, "alibi", False) or getattr(cfg, "model_type", "") == "bloom":
        return "it builds ALiBi biases from a 2-D attention mask"
    if getattr(cfg, "kv_lora_rank", None):
        return "its attention caches compressed keys and values (multi-head latent attention)"
    return None


class SlotCache:
    """A transformers-compatible cache of fixed shape (see the module docstring).

    Only what a decoder layer calls is implemented: ``update`` writes the new token's key and
    value at each slot's ``write`` column and returns the whole layer.
    """

    def __init__(self, model: Any, slots: int, length: int) -> None:
        param = next(model.parameters())
        self.slots = slots
        # allocated at the first ``place``, one per layer of the prefill's cache, in the
        # shapes and dtypes the model's keys and values come in (under a CPU's bf16 autocast keys leave the rotary embedding in
        # float32, values in bfloat16; some models' keys and values differ in width)
        self.keys: list[torch.Tensor] = []
        self.values: list[torch.Tensor] = []
        self.write = torch.zeros(slots, dtype=torch.long, device=param.device)
        self._slots = torch.arange(slots, device=param.device)
        self.length = length

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, layer_idx: int,
               *args: Any, **kwargs: Any) -> tuple[torch.Tensor, torch.Tensor]:
        keys, values = self.keys[layer_idx], self.values[layer_idx]
        keys[self._slots, :, self.write] = key_states[:, :, -1]
        values[self._slots, :, self.write] = value_states[:, :, -1]
        return keys, values

    def get_seq_length(self, layer_idx: int = 0) -> int:
        return 0  # positions and the mask are always given; nothing derives them from here

    def get_max_cache_shape(self, layer_idx: int = 0) -> int:
        return self.length

    def place(self, slot: int, layer_keys: list[torch.Tensor], layer_values: list[torch.Tensor],
              columns: torch.Tensor) -> None:
        """Copy one row's prefilled KV (``[kv_heads, cols, head_dim]`` per layer, its real
        columns ``columns``) into ``slot`` at columns ``0..n-1``."""
        n = len(columns)
        if not self.keys:
            k0, v0 = layer_keys[0], layer_values[0]
            self.keys = [k0.new_zeros((self.slots, k0.shape[0], self.length, k0.shape[-1]))
                         for _ in layer_keys]
            self.values = [v0.new_zeros((self.slots, v0.shape[0], self.length, v0.shape[-1]))
                           for _ in layer_values]
        for layer, (k, v) in enumerate(zip(layer_keys, layer_values)):
            cols = columns.to(k.device)
            self.keys[layer][slot, :, :n] = k[:, cols]
            self.values[layer][slot, :, :n] = v[:, cols]


class SlotStep:
    """One decode step over every slot, in fixed buffers; captured as a CUDA graph on CUDA
    when ``graphs`` (see the module docstring)."""

    def __init__(self, model: Any, slots: int, length: int, *, graphs: bool = True,
                 cpu_autocast: bool = False) -> None:
        self.model = model
        self._cache_kw = cache_kwarg(model)
        self.slots = slots
        self.length = length
        self.cache = SlotCache(model, slots, length)
        param = next(model.parameters())
        device = param.device
        self.device = device
        self.neg = torch.finfo(param.dtype).min
        self.ids = torch.zeros((slots, 1), dtype=torch.long, device=device)
        self.pos = torch.zeros((slots, 1), dtype=torch.long, device=device)
        self.mask = torch.full((slots, 1, 1, length), self.neg, dtype=param.dtype, device=device)
        self.mask[:, :, :, 0] = 0  # a free slot sees column 0, so its softmax stays finite
        vocab = int(model.get_output_embeddings().weight.shape[0])
        self.logits = torch.zeros((slots, vocab), dtype=torch.float32, device=device)
        self._slots = torch.arange(slots, device=device)
        self._zero = torch.zeros((), dtype=param.dtype, device=device)
        self.use_graph = graphs and device.type == "cuda"
        self.graph: Any = None
        self.captures = 0
        self.graph_error: str | None = None  # why capturing failed (the step then runs eagerly)
        # host mirrors of the next step's inputs (one copy each to the device a step)
        self.next_ids = torch.zeros(slots, dtype=torch.long)
        self.next_pos = torch.zeros(slots, dtype=torch.long)
        # bf16 autocast on a CPU (a trainer's model keeps its frozen linears in bf16 there),
        # as the growing-cache forward; fixed for this step's life (the cache's dtypes follow
        # it), so the decoder builds a new one when the setting changes
        self.cpu_autocast = cpu_autocast

    def place(self, slot: int, layer_keys: list[torch.Tensor], layer_values: list[torch.Tensor],
              columns: torch.Tensor, token: int) -> None:
        """Seat a prefilled row in ``slot``; its next step feeds ``token`` at position n."""
        n = len(columns)
        if self.mask.dtype != layer_keys[0].dtype and self.graph is None:
            # attention wants its mask in the queries' dtype, which the keys share
            self.neg = torch.finfo(layer_keys[0].dtype).min
            self.mask = self.mask.to(layer_keys[0].dtype).clamp_(min=self.neg)
            self._zero = self._zero.to(layer_keys[0].dtype)
        self.cache.place(slot, layer_keys, layer_values, columns)
        self.mask[slot].fill_(self.neg)
        self.mask[slot, :, :, :n] = 0
        self.next_ids[slot] = token
        self.next_pos[slot] = n

    def free(self, slot: int) -> None:
        self.mask[slot].fill_(self.neg)
        self.mask[slot, :, :, 0] = 0
        self.next_ids[slot] = 0
        self.next_pos[slot] = 0

    def _compute(self) -> None:
        self.mask.index_put_((self._slots, self._slots.new_zeros(()), self._slots.new_zeros(()),
                              self.cache.write), self._zero)
        autocast = self.cpu_autocast and self.device.type == "cpu"
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            out = self.model(input_ids=self.ids, attention_mask=self.mask, position_ids=self.pos,
                             use_cache=True, logits_to_keep=1, **{self._cache_kw: self.cache})
        self.logits.copy_(out.logits[:, -1, :])

    def _capture(self) -> None:
        # warm-up on a side stream (as torch.cuda.graphs requires), then capture; each run
        # recomputes the same step from the same inputs, so repeating it changes nothing.
        # On the model's device (the calling thread's current device may be another), and
        # thread-local, so other threads using CUDA meanwhile (a dense retriever, another
        # backend) neither break the capture nor are broken by it.
        side = torch.cuda.Stream(device=self.device)
        side.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(side):
            for _ in range(2):
                self._compute()
        torch.cuda.current_stream(self.device).wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, capture_error_mode="thread_local"):
            self._compute()
        self.graph = graph
        self.captures += 1

    def step(self) -> torch.Tensor:
        """Feed every slot its ``next_ids`` at ``next_pos``; the logits ``[slots, vocab]``."""
        self.ids.copy_(self.next_ids[:, None], non_blocking=True)
        self.pos.copy_(self.next_pos[:, None], non_blocking=True)
        self.cache.write.copy_(self.next_pos, non_blocking=True)
        if not self.use_graph:
            self._compute()
            return self.logits
        with torch.cuda.device(self.device):
            if self.graph is None:
                try:
                    self._capture()
                except RuntimeError as e:  # a model whose step cannot be captured
                    self.graph_error = f"{type(e).__name__}: {e}"
                    self.use_graph = False  # for this step's life; not retried every step
                    log.warning("the decode step could not be captured as a CUDA graph; "
                                "decoding eagerly in the fixed slots: %s", self.graph_error)
                    torch.cuda.synchronize(self.device)
                    self._compute()
                    return self.logits
            self.graph.replay()
        return self.logits

    def drop_graph(self) -> None:
        """Forget the captured step, to capture it again at the next step: needed only when
        the model's modules or parameter tensors were replaced (in-place updates, as an
        optimizer step or ``load_state_dict`` make, are seen by the graph as they are)."""
        self.graph = None
