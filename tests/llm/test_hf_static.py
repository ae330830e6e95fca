"""Fixed-slot decoding (marag.llm.hf_static) gives the tokens and logprobs of the growing
cache: greedy and seeded rows, rows joining a running batch, prefix-cache hits, rows too long
for the slots; on a CPU the step runs eagerly (the CUDA graph is checked on a GPU by
benchmarks/gpu_decode_speed.py)."""

from __future__ import annotations

import asyncio

import pytest
import torch

from marag.llm.base import LLMError, SamplingParams
from marag.llm.hf_decode import BatchDecoder, DecodeResult, Row
from marag.llm.hf_local import HFBackend
from marag.llm.hf_static import SlotCache, static_supported

PROMPTS = ["hi there", "what is 2+2? Tell me now, please", "name a river",
           "who wrote Hamlet?", "the capital of France is", "0 1 2 3 4 5 6 7 8 9"]


def _decode(decoder: BatchDecoder, rows: list[Row], max_rows: int = 4,
            trickle: bool = False) -> dict[int, DecodeResult]:
    """Decode ``rows``; with ``trickle`` they are admitted one per step, so they join a
    running batch at different columns."""
    out: dict[int, DecodeResult] = {}
    queue = list(rows)

    def admit(n: int) -> list[Row]:
        k = min(n, 1) if trickle else n
        taken, queue[:] = queue[:k], queue[k:]
        return taken

    def deliver(row: Row, res: DecodeResult) -> None:
        out[row.tag] = res

    decoder.run(admit, deliver, max_rows=max_rows)
    return out


def _rows(tok, params: list[SamplingParams]) -> list[Row]:
    return [Row(tok(p)["input_ids"], sp, tag=i) for i, (p, sp) in enumerate(zip(PROMPTS, params))]


def _mixed() -> list[SamplingParams]:
    return [SamplingParams(max_tokens=m, temperature=t, seed=s, top_p=tp)
            for m, t, s, tp in [(12, 0.0, None, 1.0), (7, 1.0, 3, 1.0), (15, 0.7, 5, 0.9),
                                (3, 0.0, None, 1.0), (20, 1.0, 11, 1.0), (9, 0.0, None, 1.0)]]


@pytest.mark.parametrize("trickle", [False, True])
def test_slots_decode_what_the_growing_cache_decodes(tiny, trickle):
    model, tok = tiny
    growing = _decode(BatchDecoder(model, tok), _rows(tok, _mixed()), trickle=trickle)
    static = BatchDecoder(model, tok, static_len=64)
    fixed = _decode(static, _rows(tok, _mixed()), trickle=trickle)
    assert sorted(fixed) == sorted(growing) == list(range(len(PROMPTS)))
    for i in growing:
        assert fixed[i].token_ids == growing[i].token_ids, i
        assert fixed[i].finish_reason == growing[i].finish_reason
        assert fixed[i].logprobs == pytest.approx(growing[i].logprobs, abs=1e-4)
    # the rows really went through the slots (more rows than slots: slots were reused)
    assert static.slot_step is not None and static.slot_step.slots == 4
    assert static.stats.steps > 0 and not static._seated


def test_rows_too_long_for_the_slots_decode_in_the_growing_cache_beside_them(tiny):
    model, tok = tiny
    params = [SamplingParams(max_tokens=m) for m in (30, 4, 30, 4, 30, 4)]
    growing = _decode(BatchDecoder(model, tok), _rows(tok, params))
    static = BatchDecoder(model, tok, static_len=24)  # the 30-token rows do not fit
    seated = []
    orig = static._seat

    def spy(fresh, max_rows):
        before = set(static._seated)
        rest = orig(fresh, max_rows)
        seated.extend(static._seated[s].tag for s in set(static._seated) - before)
        return rest

    static._seat = spy
    fixed = _decode(static, _rows(tok, params))
    assert {i: r.token_ids for i, r in fixed.items()} == {i: r.token_ids for i, r in growing.items()}
    assert seated and all(params[t].max_tokens == 4 for t in seated)


def test_prefix_cache_hits_seat_the_real_columns_only(tiny):
    model, tok = tiny
    system = tok("You answer questions about the world, briefly. ")["input_ids"]

    def rows():
        out = []
        for i, p in enumerate(PROMPTS[:4]):
            ids = system + tok(p)["input_ids"]
            out.append(Row(ids, SamplingParams(max_tokens=10), tag=i, prefix_len=len(system)))
        return out

    plain = _decode(BatchDecoder(model, tok), rows())
    cached = BatchDecoder(model, tok, prefix_cache=True, static_len=96)
    _decode(cached, rows()[:1])  # fills the prefix cache
    again = _decode(cached, rows())
    assert cached.prefix_cache.hits >= 4
    assert {i: r.token_ids for i, r in again.items()} == {i: r.token_ids for i, r in plain.items()}


def test_the_slot_cache_has_the_models_geometry_and_writes_each_slots_column(tiny):
    model, _ = tiny
    cache = SlotCache(model, slots=3, length=16)
    layers = model.config.num_hidden_layers
    row = [torch.zeros(2, 5, 8)] * layers
    cache.place(0, row, row, torch.arange(5))  # allocates, in the dtype of what it is given
    assert len(cache.keys) == layers
    assert cache.keys[0].shape == (3, 2, 16, 8)  # 2 kv heads of 32 / 4 heads
    cache.write.copy_(torch.tensor([0, 5, 15]))
    k = torch.ones(3, 2, 1, 8)
    keys, _ = cache.update(k, k * 2, 0)
    assert keys[0, :, 0].eq(1).all() and keys[1, :, 5].eq(1).all() and keys[2, :, 15].eq(1).all()
    assert keys.sum() == 3 * 2 * 8
    assert static_supported(model) is None


def test_backend_with_static_cache_answers_as_without(tiny):
    model, tok = tiny
    msgs = [[{"role": "user", "content": p}] for p in PROMPTS]
    sp = SamplingParams(max_tokens=8, temperature=0.0)

    async def go(backend):
        try:
            return [c.text for c in await backend.generate(msgs, sp)]
        finally:
            await backend.aclose()

    a = asyncio.run(go(HFBackend("tiny", model=model, tokenizer=tok, max_batch_size=4)))
    b = asyncio.run(go(HFBackend("tiny", model=model, tokenizer=tok, max_batch_size=4,
                                 static_cache=128)))
    assert a == b


def test_models_with_sliding_window_layers_cannot_take_slots():
    from types import SimpleNamespace as NS

    gemma = NS(config=NS(layer_types=["sliding_attention", "full_attention"]))
    assert "not all full attention" in static_supported(gemma)
    windowed = NS(config=NS(sliding_window=4096, use_sliding_window=True))
    assert "sliding window" in static_supported(windowed)
    qwen = NS(config=NS(layer_types=["full_attention"] * 2, sliding_window=4096,
                        use_sliding_window=False))  # Qwen2.5: a window declared, not used
    assert static_supported(qwen) is None


def test_a_backend_refuses_slots_for_a_model_that_cannot_take_them(tiny, monkeypatch):
    import marag.llm.hf_static as hs

    model, tok = tiny
    monkeypatch.setattr(hs, "static_supported", lambda m: "its layers are not all full attention")
    with pytest.raises(LLMError, match="static_cache.*not all full attention"):
        HFBackend("tiny", model=model, tokenizer=tok, static_cache=64)


def test_a_failing_run_frees_its_slots_and_the_next_run_is_clean(tiny):
    model, tok = tiny
    decoder = BatchDecoder(model, tok, static_len=64)
    calls = {"n": 0}
    real = decoder._step_slots

    def boom(deliver, **kw):
        calls["n"] += 1
        if calls["n"] == 3:
            raise RuntimeError("device lost")
        real(deliver, **kw)

    decoder._step_slots = boom
    params = [SamplingParams(max_tokens=10)] * len(PROMPTS)
    with pytest.raises(RuntimeError, match="device lost"):
        _decode(decoder, _rows(tok, params))
    assert not decoder._seated and decoder.slot_step is None  # new slots next time
    decoder._step_slots = real
    again = _decode(decoder, _rows(tok, params))
    fresh = _decode(BatchDecoder(model, tok), _rows(tok, params))
    assert {i: r.token_ids for i, r in again.items()} == {i: r.token_ids for i, r in fresh.items()}


def test_switching_bf16_autocast_between_runs_rebuilds_the_slots(tiny):
    # HFBackend.bf16_autocast is public (a trainer sets it after building the backend); the
    # slots' dtypes follow it, so a change between runs gives new slots, not a dtype error
    model, tok = tiny
    decoder = BatchDecoder(model, tok, static_len=64)
    params = [SamplingParams(max_tokens=6)] * 4
    _decode(decoder, _rows(tok, params))
    first = decoder.slot_step
    decoder.bf16_autocast = True
    auto = _decode(decoder, _rows(tok, params))
    assert decoder.slot_step is not first and decoder.slot_step.cpu_autocast
    growing = BatchDecoder(model, tok, bf16_autocast=True)
    assert {i: r.token_ids for i, r in auto.items()} == {
        i: r.token_ids for i, r in _decode(growing, _rows(tok, params)).items()}
    decoder.bf16_autocast = False
    _decode(decoder, _rows(tok, params))
    assert not decoder.slot_step.cpu_autocast


def test_models_whose_cache_slots_cannot_hold_are_refused():
    from types import SimpleNamespace as NS

    assert "ALiBi" in static_supported(NS(config=NS(model_type="bloom")))
    assert "ALiBi" in static_supported(NS(config=NS(model_type="falcon", alibi=True)))
    assert "latent" in static_supported(NS(config=NS(model_type="deepseek_v3", kv_lora_rank=512)))
    assert static_supported(NS(config=NS(model_type="falcon", alibi=False))) is None
