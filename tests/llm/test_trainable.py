"""The hf backend's trainable face (marag.llm.trainable.TrainableBackend): what marag train
and marag sft read and set, without reaching into the decoder."""

from __future__ import annotations

import asyncio

from marag.llm.base import SamplingParams
from marag.llm.chat import eos_ids
from marag.llm.hf_local import HFBackend
from marag.llm.scripted import ScriptedLLM
from marag.llm.trainable import TrainableBackend


def test_the_hf_backend_is_trainable_and_api_backends_are_not(tiny):
    model, tok = tiny
    backend = HFBackend("tiny", model=model, tokenizer=tok, batch_wait_ms=0)
    assert isinstance(backend, TrainableBackend)
    assert not isinstance(ScriptedLLM({"AG": "x"}), TrainableBackend)
    assert backend.eos_ids == frozenset(eos_ids(model, tok))
    assert backend.pad_id == (tok.pad_token_id if tok.pad_token_id is not None
                              else min(backend.eos_ids))
    assert backend.vocab_size == model.get_output_embeddings().weight.shape[0]
    assert backend.adapters == ()


def test_bf16_autocast_of_decoding_is_switched_on_the_backend(tiny):
    model, tok = tiny
    backend = HFBackend("tiny", model=model, tokenizer=tok, batch_wait_ms=0)
    messages = [{"role": "user", "content": "What is the capital of France?"}]
    params = SamplingParams(max_tokens=4, logprobs=True)

    async def greedy() -> list[float]:
        [c] = await backend.generate([messages], params)
        await backend.aclose()
        return c.logprobs

    assert backend.bf16_autocast is False
    plain = asyncio.run(greedy())
    backend.bf16_autocast = True
    assert backend.bf16_autocast is True
    assert asyncio.run(greedy()) != plain  # bf16 matmuls: other logprobs
    backend.bf16_autocast = False
    assert asyncio.run(greedy()) == plain
