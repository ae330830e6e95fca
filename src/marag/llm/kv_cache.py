"""A KV cache whose layers append decoded tokens in place.

transformers' ``DynamicLayer`` appends each new token with ``torch.cat``, which copies the
whole cache of the layer at every decoding step: with 16 rows of ~750 tokens that is ~280 MB
per step for SmolLM2-135M, and on the 2-core CPU box it was 62% of a decoding step's time
(torch profiler, ``aten::cat``). ``GrowingLayer`` keeps the keys and values in buffers with
spare columns and writes new tokens into them; ``keys``/``values`` are views of the filled
part, so everything that reads them (attention, the decoder's merges and row selection)
sees the same tensors as before.

Code that replaces ``keys``/``values`` (a merge, a row selection, a prefix cut) simply makes
the next update copy them into a fresh buffer: a layer only writes into a buffer while its
``keys`` are still the view it handed out.
"""

from __future__ import annotations

from typing import Any

import torch
from transformers.cache_utils import DynamicCache, DynamicLayer

SPARE = 64  # columns allocated beyond the current length when a buffer is (re)made


class GrowingLayer(DynamicLayer):
    """``DynamicLayer`` with in-place appends into spare capacity (same results)."""

    _kbuf: torch.Tensor | None = None
    _vbuf: torch.Tensor | None = None
    _view: torch.Tensor | None = None  # the ``keys`` view last handed out

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any,
               **kwargs: Any) -> tuple[torch.Tensor, torch.Tensor]:
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        keys, values = self.keys, self.values
        n = keys.shape[-2] if keys.numel() else 0
        add = key_states.shape[-2]
        kbuf = self._kbuf
        fits = (kbuf is not None and self._view is keys and kbuf.shape[-2] >= n + add
                and kbuf.shape[0] == key_states.shape[0])
        if not fits:
            shape = (*key_states.shape[:2], n + add + SPARE, key_states.shape[-1])
            kbuf = key_states.new_empty(shape)
            vbuf = value_states.new_empty((*shape[:3], value_states.shape[-1]))
            if n:
                kbuf[:, :, :n].copy_(keys)
                vbuf[:, :, :n].copy_(values)
            self._kbuf, self._vbuf = kbuf, vbuf
        vbuf = self._vbuf
        assert vbuf is not None
        kbuf[:, :, n:n + add].copy_(key_states)
        vbuf[:, :, n:n + add].copy_(value_states)
        self.keys, self.values = kbuf[:, :, :n + add], vbuf[:, :, :n + add]
        self._view = self.keys
        return self.keys, self.values


def new_cache(config: Any) -> DynamicCache:
    """A ``DynamicCache`` for ``config`` whose plain growing layers append in place
    (sliding-window and other layer kinds are left as they are)."""
    cache = DynamicCache(config=config)
    for layer in cache.layers:
        if type(layer) is DynamicLayer:
            layer.__class__ = GrowingLayer
    return cache
