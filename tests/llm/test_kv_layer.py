"""RoomyLayer: in-place appends that show exactly what transformers' DynamicLayer shows."""

import pytest
import torch
from transformers.cache_utils import DynamicLayer

from marag.llm.kv_layer import RoomyLayer, roomy_cache


def _kv(rows: int, n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(rows, 2, n, 4, generator=g), torch.randn(rows, 2, n, 4, generator=g)


def _same(a: DynamicLayer, b: DynamicLayer) -> None:
    assert torch.equal(a.keys, b.keys) and torch.equal(a.values, b.values)
    assert a.get_seq_length() == b.get_seq_length()


def test_a_prefill_then_decoding_steps_match_dynamic_layer_and_copy_once_per_spare_steps():
    roomy, plain = RoomyLayer(spare=4), DynamicLayer()
    for layer in (roomy, plain):
        layer.update(*_kv(3, 7, 0))
    assert roomy._kbuf is not None and roomy._kbuf.shape[-2] == 7  # a prefill: no spare
    for step in range(10):
        out_r = roomy.update(*_kv(3, 1, step + 1))
        out_p = plain.update(*_kv(3, 1, step + 1))
        assert torch.equal(out_r[0], out_p[0]) and torch.equal(out_r[1], out_p[1])
        _same(roomy, plain)
    # the prefill's buffer, then one of 7 + 1 + 4 columns, then 12 + 1 + 4 (steps 1, 6)
    assert roomy.copies == 3
    assert roomy.get_seq_length() == 17


def test_views_handed_out_earlier_never_change():
    layer = RoomyLayer(spare=8)
    layer.update(*_kv(2, 5, 0))
    layer.update(*_kv(2, 1, 1))
    kept_k, kept_v = layer.keys, layer.values  # what a prefix-cache entry would hold
    before = kept_k.clone(), kept_v.clone()
    for step in range(5):
        layer.update(*_kv(2, 1, step + 2))
    assert kept_k.data_ptr() == layer.keys.data_ptr()  # the same buffer, written past its end
    assert torch.equal(kept_k, before[0]) and torch.equal(kept_v, before[1])


def test_replaced_or_cut_keys_are_copied_not_written_into():
    # the decoder assigns new tensors when it selects rows, merges batches or trims padding
    roomy, plain = RoomyLayer(spare=8), DynamicLayer()
    for layer in (roomy, plain):
        layer.update(*_kv(3, 6, 0))
        layer.update(*_kv(3, 1, 1))
        layer.batch_select_indices(torch.tensor([0, 2]))
        layer.update(*_kv(2, 1, 2))
    _same(roomy, plain)
    for layer in (roomy, plain):  # trim a leading column, as _Batch.select does
        layer.keys, layer.values = layer.keys[:, :, 1:], layer.values[:, :, 1:]
        layer.update(*_kv(2, 1, 3))
    _same(roomy, plain)
    trimmed_view = roomy.keys
    snapshot = trimmed_view.clone()
    for layer in (roomy, plain):  # crop drops the last column; the next write must not land
        layer.crop(-1)            # inside the view taken before the crop
        layer.update(*_kv(2, 1, 4))
    _same(roomy, plain)
    assert torch.equal(trimmed_view, snapshot)


def test_a_merge_with_more_rows_reset_and_a_dtype_change_start_new_buffers():
    roomy, plain = RoomyLayer(spare=2), DynamicLayer()
    for layer in (roomy, plain):
        layer.update(*_kv(2, 4, 0))
        layer.update(*_kv(2, 1, 1))
        other_k, other_v = _kv(1, 5, 2)
        layer.keys = torch.cat([layer.keys, other_k], dim=0)  # _merge: rows of another batch
        layer.values = torch.cat([layer.values, other_v], dim=0)
        layer.update(*_kv(3, 1, 3))
    _same(roomy, plain)
    roomy.reset()
    assert roomy.get_seq_length() == 0
    k, v = _kv(1, 3, 4)
    roomy.update(k.to(torch.bfloat16), v.to(torch.bfloat16))
    assert roomy.keys.dtype == torch.bfloat16 and torch.equal(roomy.keys, k.to(torch.bfloat16))


def test_spare_must_be_positive():
    with pytest.raises(ValueError, match="spare >= 1"):
        RoomyLayer(spare=0)


def test_roomy_cache_swaps_plain_layers_only():
    from transformers import Qwen2Config

    cfg = Qwen2Config(num_hidden_layers=3, hidden_size=16, num_attention_heads=2,
                      num_key_value_heads=1, intermediate_size=32, vocab_size=50)
    assert all(type(layer) is RoomyLayer for layer in roomy_cache(cfg).layers)
    sliding = Qwen2Config(num_hidden_layers=2, hidden_size=16, num_attention_heads=2,
                          num_key_value_heads=1, intermediate_size=32, vocab_size=50,
                          use_sliding_window=True, sliding_window=8, max_window_layers=0)
    layers = roomy_cache(sliding).layers
    assert not any(isinstance(layer, RoomyLayer) for layer in layers)


def test_the_decoders_batches_append_in_place(tiny, monkeypatch):
    # the hf decoder's caches are RoomyLayers: 20 decoded tokens of one row cost one buffer
    # for its prefill and one with room, not a copy a token
    import asyncio

    from marag.llm.base import SamplingParams
    from marag.llm.hf_decode import BatchDecoder
    from marag.llm.hf_local import HFBackend

    model, tok = tiny
    backend = HFBackend("tiny", model=model, tokenizer=tok, prefix_cache=False)
    caches = []
    forward = BatchDecoder._forward

    def spy(self, ids, mask, pos, cache):
        caches.append(cache)
        return forward(self, ids, mask, pos, cache)

    monkeypatch.setattr(BatchDecoder, "_forward", spy)
    out = asyncio.run(backend.generate([[{"role": "user", "content": "Count to ten."}]],
                                       SamplingParams(max_tokens=20, min_tokens=20)))
    assert len(out[0].token_ids) == 20 and len(caches) == 20
    assert all(c is caches[0] for c in caches)  # one batch, one cache
    layers = caches[0].layers
    assert all(type(layer) is RoomyLayer for layer in layers)
    assert all(layer.copies == 2 for layer in layers)
