"""A KV cache layer that appends decoded tokens in place instead of copying the whole cache.

transformers' ``DynamicLayer`` grows by ``torch.cat`` on every call, so each decoding step
copies every row's keys and values of every layer: on the 2-core CPU an 8-row step at 1,500
cached columns took 0.491 s with it and 0.451 s with this layer, 16 rows 0.838 s and 0.702 s
(``benchmarks/decode_step.py --layers dynamic roomy``; BENCHMARKS.md, "Shared-prefix KV
cache").
``RoomyLayer`` keeps its keys and values as views of buffers with spare columns: a one-token
update (a decoding step) writes into the next spare column, and only when the room is used up,
or when someone replaced ``keys``/``values`` (the decoder merges, selects and trims batches by
assigning new tensors), does it copy into a new buffer, with ``spare`` columns to spare. A
multi-token update (a prefill) gets a buffer of exactly its size, so prompt KV kept in the
prefix cache holds no spare columns.

Only columns past every view handed out are ever written, so a view someone kept (a
prefix-cache entry, a caller's reference) never changes under them.
"""

from __future__ import annotations

from typing import Any

import torch
from transformers.cache_utils import DynamicLayer


class RoomyLayer(DynamicLayer):
    """A ``DynamicLayer`` whose one-token appends write in place (module docstring)."""

    def __init__(self, spare: int = 64) -> None:
        super().__init__()
        if spare < 1:
            raise ValueError(f"RoomyLayer needs spare >= 1, got {spare}")
        self.spare = spare
        self._kbuf: torch.Tensor | None = None
        self._vbuf: torch.Tensor | None = None
        self._used = 0  # columns of the buffers that keys/values show
        self.copies = 0  # buffers allocated (each a copy of the columns so far)

    def _owns(self, new: torch.Tensor, new_values: torch.Tensor) -> bool:
        """keys/values are still this layer's own views, and ``new`` / ``new_values`` fit
        their rows, heads, width, dtype and device and the room left."""
        kb, vb, k, v = self._kbuf, self._vbuf, self.keys, self.values
        if kb is None or vb is None or k is None or v is None:
            return False
        return (k.data_ptr() == kb.data_ptr() and v.data_ptr() == vb.data_ptr()
                and k.shape[-2] == self._used and v.shape[-2] == self._used
                and k.stride() == kb.stride() and v.stride() == vb.stride()
                and new.shape[:2] == kb.shape[:2] and new.shape[-1] == kb.shape[-1]
                and new_values.shape[:2] == vb.shape[:2]
                and new_values.shape[-1] == vb.shape[-1]
                and new.dtype == kb.dtype and new_values.dtype == vb.dtype
                and new.device == kb.device
                and self._used + new.shape[-2] <= kb.shape[-2])

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any,
               **kwargs: Any) -> tuple[torch.Tensor, torch.Tensor]:
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        n = key_states.shape[-2]
        if not self._owns(key_states, value_states):
            # let go of a buffer that keys/values no longer show (the decoder replaced them:
            # rows selected or merged) before allocating the next, so the two never coexist
            self._kbuf = self._vbuf = None
            self._grow(key_states, value_states, spare=self.spare if n == 1 else 0)
        assert self._kbuf is not None and self._vbuf is not None
        self._kbuf[:, :, self._used:self._used + n] = key_states
        self._vbuf[:, :, self._used:self._used + n] = value_states
        self._used += n
        self.keys = self._kbuf[:, :, :self._used]
        self.values = self._vbuf[:, :, :self._used]
        return self.keys, self.values

    def _grow(self, key_states: torch.Tensor, value_states: torch.Tensor, spare: int) -> None:
        """New buffers holding the current keys/values and room for ``key_states`` plus
        ``spare`` columns (what one ``torch.cat`` would have copied, once)."""
        k, v = self.keys, self.values
        old = k.shape[-2] if k is not None and k.dim() == 4 else 0
        b, h, n, d = key_states.shape
        width = old + n + spare
        kb = key_states.new_empty((b, h, width, d))
        vb = value_states.new_empty((b, h, width, value_states.shape[-1]))
        if old:
            assert k is not None and v is not None
            kb[:, :, :old] = k
            vb[:, :, :old] = v
        self._kbuf, self._vbuf, self._used = kb, vb, old
        self.copies += 1

    def reset(self) -> None:
        self._kbuf = self._vbuf = None
        self._used = 0
        super().reset()


def roomy_cache(config: Any, spare: int = 64) -> Any:
    """A ``DynamicCache`` for ``config`` whose plain growing layers are ``RoomyLayer``s; a
    model with other layer kinds (sliding windows) keeps transformers' own."""
    from transformers import DynamicCache

    cache = DynamicCache(config=config)
    if all(type(layer) is DynamicLayer for layer in cache.layers):
        cache.layers = [RoomyLayer(spare) for _ in cache.layers]
    return cache
