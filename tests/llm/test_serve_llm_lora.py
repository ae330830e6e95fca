"""serve-llm's runtime LoRA endpoints (vLLM's API) and return_token_ids, on the tiny model."""

from __future__ import annotations

import asyncio

import httpx
import pytest
import torch

from marag.llm.base import LLMError, SamplingParams
from marag.llm.hf_local import HFBackend
from marag.llm.lora_http import load_lora_adapter, unload_lora_adapter
from marag.llm.openai_http import OpenAIBackend
from marag.llm.server import create_app

HI = [{"role": "user", "content": "What is the capital of France?"}]


def _adapter(model, out, seed: int):
    """A peft LoRA adapter for ``model`` with random (non-zero) weights, saved to ``out``."""
    import copy

    from peft import LoraConfig, get_peft_model

    torch.manual_seed(seed)
    peft = get_peft_model(copy.deepcopy(model), LoraConfig(
        r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], task_type="CAUSAL_LM"))
    with torch.no_grad():
        for name, p in peft.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.5)
    peft.save_pretrained(str(out))
    return peft.merge_and_unload()


@pytest.fixture
def lora_server(tiny, serve_app):
    model, tok = tiny
    backend = HFBackend("tiny", model=model, tokenizer=tok, batch_wait_ms=0)
    app = create_app(backend, ["tiny"], allow_lora_updates=True)
    with serve_app(app) as url:
        yield url, app


async def _greedy(url: str, name: str) -> tuple[str, list[float], list[int]]:
    client = OpenAIBackend(url + "/v1", name, token_ids=True)
    [c] = await client.generate([HI], SamplingParams(max_tokens=12, logprobs=True))
    await client.aclose()
    return c.text, c.logprobs, c.token_ids


async def _local(model, tok) -> tuple[str, list[float], list[int]]:
    [c] = await HFBackend("x", model=model, tokenizer=tok).generate(
        [HI], SamplingParams(max_tokens=12, logprobs=True))
    return c.text, c.logprobs, c.token_ids


def test_load_reload_and_unload_an_adapter(lora_server, tiny, tmp_path):
    url, app = lora_server
    model, tok = tiny
    first = _adapter(model, tmp_path / "a1", seed=1)
    second = _adapter(model, tmp_path / "a2", seed=2)
    v1 = url + "/v1"

    msg = load_lora_adapter(v1, "policy", str(tmp_path / "a1"), inplace=False)
    assert "policy" in msg
    ids = [m["id"] for m in httpx.get(v1 + "/models").json()["data"]]
    assert ids == ["tiny", "policy"]
    served = asyncio.run(_greedy(url, "policy"))
    want = asyncio.run(_local(first, tok))
    assert served[2] == want[2] and served[1] == pytest.approx(want[1], abs=1e-4)
    plain = asyncio.run(_greedy(url, "tiny"))  # the base model still answers as before
    base_want = asyncio.run(_local(model, tok))
    assert plain[2] == base_want[2] and plain[1] == pytest.approx(base_want[1], abs=1e-4)
    assert plain[1] != pytest.approx(served[1], abs=1e-3)

    # a loaded name is replaced only in place
    again = httpx.post(v1 + "/load_lora_adapter",
                       json={"lora_name": "policy", "lora_path": str(tmp_path / "a2")})
    assert again.status_code == 400 and "load_inplace" in again.json()["error"]["message"]
    lora_backend = app.state.adapters.get("policy")
    load_lora_adapter(v1, "policy", str(tmp_path / "a2"), inplace=True)
    assert lora_backend.weights_version == 1  # the same backend, new weights, KV dropped
    served2 = asyncio.run(_greedy(url, "policy"))
    want2 = asyncio.run(_local(second, tok))
    assert served2[2] == want2[2] and served2[1] == pytest.approx(want2[1], abs=1e-4)

    unload_lora_adapter(v1, "policy")
    gone = httpx.post(v1 + "/chat/completions", json={"model": "policy", "messages": HI})
    assert gone.status_code == 404
    with pytest.raises(LLMError, match="not loaded"):
        unload_lora_adapter(v1, "policy")


def test_bad_adapter_requests_are_clear(lora_server, tmp_path):
    url, _ = lora_server
    with pytest.raises(LLMError, match="no LoRA adapter"):
        load_lora_adapter(url + "/v1", "policy", str(tmp_path / "missing"))
    with pytest.raises(LLMError, match="base model's name"):
        load_lora_adapter(url + "/v1", "tiny", str(tmp_path))


def test_lora_endpoints_are_off_unless_allowed(tiny, serve_app, tmp_path):
    model, tok = tiny
    backend = HFBackend("tiny", model=model, tokenizer=tok, batch_wait_ms=0)
    with serve_app(create_app(backend, ["tiny"])) as url, pytest.raises(
            LLMError, match="VLLM_ALLOW_RUNTIME_LORA_UPDATING"):
        load_lora_adapter(url + "/v1", "policy", str(tmp_path))


def test_return_token_ids_gives_prompt_and_completion_ids(lora_server):
    url, app = lora_server
    base = app.state.adapters.base
    r = httpx.post(url + "/v1/chat/completions", json={
        "model": "tiny", "messages": HI, "max_tokens": 5, "return_token_ids": True}).json()
    assert r["prompt_token_ids"] == base.encode(HI)
    assert len(r["choices"][0]["token_ids"]) == r["usage"]["completion_tokens"]
    c = httpx.post(url + "/v1/completions", json={
        "model": "tiny", "prompt": "Paris is", "max_tokens": 3, "temperature": 0,
        "return_token_ids": True}).json()
    assert c["choices"][0]["prompt_token_ids"] == list(base.tokenizer("Paris is")["input_ids"])
    assert len(c["choices"][0]["token_ids"]) == c["usage"]["completion_tokens"] > 0
    # the openai client reads them back
    client = OpenAIBackend(url + "/v1", "tiny", token_ids=True)
    [got] = asyncio.run(client.generate([HI], SamplingParams(max_tokens=4, logprobs=True)))
    assert got.prompt_token_ids == base.encode(HI) and len(got.token_ids) == 4
