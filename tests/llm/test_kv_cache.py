"""In-place KV appends (``GrowingLayer``) must give the decoder exactly the outputs of
transformers' copying ``DynamicLayer``, through joins, finished rows and prefix reuse."""

from __future__ import annotations

import random

import torch
from transformers import DynamicCache
from transformers.cache_utils import DynamicLayer

from marag.llm import kv_cache
from marag.llm.base import SamplingParams
from marag.llm.hf_decode import BatchDecoder, Row
from marag.llm.kv_cache import SPARE, GrowingLayer, new_cache


def _layer(cache):
    return cache.layers[0]


def test_appends_write_into_spare_columns_and_views_equal_a_concatenation():
    cache = new_cache(_config())
    layer = _layer(cache)
    assert type(layer) is GrowingLayer
    k0, v0 = torch.randn(2, 1, 5, 4), torch.randn(2, 1, 5, 4)
    keys, values = layer.update(k0, v0)
    buffer = layer._kbuf
    assert buffer.shape[2] == 5 + SPARE
    k1, v1 = torch.randn(2, 1, 1, 4), torch.randn(2, 1, 1, 4)
    keys, values = layer.update(k1, v1)
    assert layer._kbuf is buffer  # written in place, no new buffer
    assert torch.equal(keys, torch.cat([k0, k1], dim=2))
    assert torch.equal(values, torch.cat([v0, v1], dim=2))
    assert cache.get_seq_length() == 6


def test_replaced_keys_are_copied_into_a_fresh_buffer_never_overwritten():
    layer = _layer(new_cache(_config()))
    k0 = torch.randn(3, 1, 4, 2)
    layer.update(k0, k0.clone())
    old = layer._kbuf
    # a row selection replaces keys/values by new tensors (what BatchDecoder does)
    layer.keys, layer.values = layer.keys[[0, 2]], layer.values[[0, 2]]
    kept = layer.keys.clone()
    k1 = torch.randn(2, 1, 1, 2)
    keys, _ = layer.update(k1, k1.clone())
    assert layer._kbuf is not old
    assert torch.equal(keys, torch.cat([kept, k1], dim=2))
    # a cut view of the buffer (dropping padding columns) is re-buffered too
    layer.keys, layer.values = layer.keys[:, :, 2:], layer.values[:, :, 2:]
    cut = layer.keys.clone()
    keys, _ = layer.update(k1, k1.clone())
    assert torch.equal(keys, torch.cat([cut, k1], dim=2))


def test_buffers_grow_when_the_spare_columns_run_out():
    layer = _layer(new_cache(_config()))
    layer.update(torch.zeros(1, 1, 1, 2), torch.zeros(1, 1, 1, 2))
    steps = [torch.full((1, 1, 1, 2), float(i)) for i in range(SPARE + 3)]
    for s in steps:
        keys, _ = layer.update(s, s)
    assert keys.shape[2] == SPARE + 4
    assert torch.equal(keys[0, 0, 1:, 0], torch.arange(SPARE + 3, dtype=keys.dtype))


def _config():
    from marag.llm.tiny import build_tiny_model

    return build_tiny_model(seed=0)[0].config


def _run(tiny, monkeypatch, grow: bool, prefix: bool):
    model, tok = tiny
    if not grow:
        monkeypatch.setattr(kv_cache, "new_cache", lambda config: DynamicCache(config=config))
    rng = random.Random(7)
    shared = [rng.randrange(10, 200) for _ in range(9)]
    rows = [Row(shared + [rng.randrange(10, 200) for _ in range(rng.randrange(3, 30))],
                SamplingParams(max_tokens=rng.randrange(2, SPARE + 20),
                               temperature=0.0 if i % 3 else 0.8, seed=i),
                prefix_len=9 if prefix else 0)
            for i in range(14)]
    queue = list(rows)
    out: dict[int, tuple[list[int], list[float]]] = {}

    def admit(n):
        taken = queue[: min(n, 3)]  # a few at a time: rows join a running batch
        del queue[: len(taken)]
        return taken

    dec = BatchDecoder(model, tok, prefix_cache=prefix)
    dec.run(admit, lambda r, res: out.__setitem__(id(r), (res.token_ids, res.logprobs)), 5)
    monkeypatch.undo()
    return [out[id(r)] for r in rows]


def test_decoder_outputs_equal_with_copying_layers(tiny, monkeypatch):
    assert type(DynamicCache(config=tiny[0].config).layers[0]) is DynamicLayer
    for prefix in (False, True):
        plain = _run(tiny, monkeypatch, grow=False, prefix=prefix)
        grown = _run(tiny, monkeypatch, grow=True, prefix=prefix)
        assert [t for t, _ in grown] == [t for t, _ in plain]
        assert [lp for _, lp in grown] == [lp for _, lp in plain]
