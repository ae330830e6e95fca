"""``dtype: auto``: bfloat16 for inference on CPUs with native bf16 matmul, float32 for
training on CPU; and the hf backend decodes correctly in bfloat16."""

import asyncio
import copy
import math

import pytest
import torch

from marag.llm import dtype as dt
from marag.llm.base import SamplingParams
from marag.llm.hf_local import HFBackend


@pytest.mark.parametrize(("native", "purpose", "want"), [
    (True, "inference", "bfloat16"),
    (False, "inference", "float32"),
    (True, "training", "float32"),
    (False, "training", "float32"),
])
def test_auto_on_cpu_follows_the_cpu_and_the_purpose(monkeypatch, native, purpose, want):
    monkeypatch.setattr(dt, "cpu_has_native_bf16", lambda: native)
    assert dt.resolve_dtype("auto", "cpu", purpose) == want


def test_auto_on_cuda_is_bf16_where_supported_and_named_dtypes_pass_through(monkeypatch):
    monkeypatch.setattr(dt, "cuda_has_bf16", lambda: True)
    assert dt.resolve_dtype("auto", "cuda:1") == "bfloat16"
    assert dt.resolve_dtype("auto", "cuda", "training") == "bfloat16"
    monkeypatch.setattr(dt, "cuda_has_bf16", lambda: False)
    assert dt.resolve_dtype("auto", "cuda") == "float32"
    monkeypatch.setattr(dt, "cpu_has_native_bf16", lambda: True)
    for name in dt.DTYPES:
        assert dt.resolve_dtype(name, "cpu") == name
        assert dt.resolve_dtype(name, "cpu", "training") == name


def test_cpu_probe_reads_torch_helpers(monkeypatch):
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: False)
    monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: True)
    assert dt.cpu_has_native_bf16()
    monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: False)
    assert not dt.cpu_has_native_bf16()
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: True)
    assert dt.cpu_has_native_bf16()


SYSTEM = {"role": "system", "content": "You answer questions about documents. Be brief."}
EXAMPLE = [{"role": "user", "content": "What is the capital of France?"},
           {"role": "assistant", "content": "<answer>Paris</answer>"}]
CONVS = [[SYSTEM, *EXAMPLE, {"role": "user", "content": q}]
         for q in ("Who wrote Hamlet?", "Where is Mount Everest?", "hi", "Which city? <answer>")]


def test_bf16_decoding_batched_with_prefix_cache_gives_finite_fp32_logprobs(tiny):
    model, tok = tiny
    half = copy.deepcopy(model).to(torch.bfloat16)
    backend = HFBackend("tiny", model=half, tokenizer=tok, batch_wait_ms=20, max_batch_size=3)
    assert backend.dtype == "bfloat16"

    async def go():
        greedy = await backend.generate(CONVS, SamplingParams(max_tokens=12))
        sampled = await backend.generate(CONVS, SamplingParams(max_tokens=12, temperature=0.8,
                                                               top_p=0.9, seed=3))
        alone = [(await backend.generate([c], SamplingParams(max_tokens=12)))[0]
                 for c in CONVS]
        return greedy, sampled, alone

    greedy, sampled, alone = asyncio.run(go())
    for c in greedy + sampled + alone:
        assert c.completion_tokens == len(c.token_ids) == len(c.logprobs) >= 1
        assert all(math.isfinite(lp) and lp <= 0 for lp in c.logprobs)
    cache = backend._decoder.prefix_cache
    assert cache is not None and cache.misses == 1 and cache.hits == 3 * len(CONVS) - 1
    stats = backend.decode_stats
    assert stats.prefills >= 3 and stats.steps >= 1 and stats.prefix_tokens > 0
    # a row's greedy tokens do not depend on its batch-mates beyond bf16 rounding of ties;
    # the tiny model's peaked outputs make them agree
    assert [c.token_ids for c in greedy] == [c.token_ids for c in alone]
