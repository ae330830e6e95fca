"""The openai client against marag's own server (tiny model) and deliberately bad endpoints."""

import asyncio
import time

import pytest
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from marag.llm.base import LLM, LLMError, SamplingParams
from marag.llm.hf_local import HFBackend
from marag.llm.openai_http import OpenAIBackend
from marag.llm.server import create_app

CONVS = [[{"role": "user", "content": q}] for q in
         ["What is the capital of France?", "Who wrote Hamlet?", "hi there"]]


def _ok(content: str = "<answer>Paris</answer>") -> dict:
    return {"id": "x", "object": "chat.completion", "model": "fake",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                         "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 7, "completion_tokens": 3}}


@pytest.fixture(scope="module")
def tiny_server(tiny, serve_app):
    model, tok = tiny
    backend = HFBackend("tiny", model=model, tokenizer=tok, batch_wait_ms=20)
    with serve_app(create_app(backend)) as url:
        yield url, backend


async def test_client_against_served_tiny_model(tiny_server):
    url, served = tiny_server
    client = OpenAIBackend(url + "/v1", "tiny", max_concurrency=4)
    assert isinstance(client, LLM)
    p = SamplingParams(max_tokens=10, logprobs=True)
    got = await client.generate(CONVS, p)
    # the served model answers exactly as the backend does in-process
    direct = HFBackend("tiny", model=served.module, tokenizer=served.tokenizer)
    want = await direct.generate(CONVS, p)
    for g, w, conv in zip(got, want, CONVS):
        assert g.text == w.text and g.finish_reason == w.finish_reason
        assert g.prompt_tokens == len(served.encode(conv)) == w.prompt_tokens
        assert g.completion_tokens == w.completion_tokens == len(g.logprobs)
        assert g.logprobs == pytest.approx(w.logprobs, abs=1e-4)
        assert g.model == "tiny"
    # without the flag the server sends no logprobs
    [plain] = await client.generate(CONVS[:1], SamplingParams(max_tokens=4))
    assert plain.logprobs is None and plain.completion_tokens == 4
    await client.aclose()


async def test_token_ids_come_back_when_asked_for(tiny_server):
    url, served = tiny_server
    p = SamplingParams(max_tokens=8, logprobs=True)
    want = await HFBackend("tiny", model=served.module, tokenizer=served.tokenizer).generate(
        CONVS, p)
    asking = OpenAIBackend(url + "/v1", "tiny", token_ids=True)
    assert asking.body(CONVS[0], p)["return_tokens_as_token_ids"] is True
    got = await asking.generate(CONVS, p)
    for g, w in zip(got, want, strict=True):
        assert g.token_ids == w.token_ids and len(g.token_ids) == g.completion_tokens
        assert g.logprobs == pytest.approx(w.logprobs, abs=1e-4)
    # off by default (OpenAI's own API rejects the field): text tokens, no ids
    plain = OpenAIBackend(url + "/v1", "tiny")
    assert "return_tokens_as_token_ids" not in plain.body(CONVS[0], p)
    [c] = await plain.generate(CONVS[:1], p)
    assert c.token_ids is None and c.logprobs
    await asking.aclose()
    await plain.aclose()


def test_token_ids_need_every_entry_in_id_form():
    from marag.llm.openai_http import _token_ids

    assert _token_ids(["token_id:5", "token_id:0"]) == [5, 0]
    assert _token_ids(["token_id:5", "Paris"]) is None
    assert _token_ids(["token_id:x"]) is None
    assert _token_ids([None]) is None


async def test_server_rejects_bad_requests(tiny_server):
    import httpx

    url, _ = tiny_server
    async with httpx.AsyncClient() as http:
        models = (await http.get(url + "/v1/models")).json()
        assert models["data"][0]["id"] == "tiny"
        bad = [{"messages": []}, {"messages": CONVS[0], "n": 2},
               {"messages": CONVS[0], "temperature": -1},
               {"messages": [{"role": "user"}]}, {"messages": CONVS[0], "model": "other"}]
        for body in bad:
            r = await http.post(url + "/v1/chat/completions", json=body)
            assert 400 <= r.status_code < 500, body
            assert r.json()["error"]["message"]
        r = await http.post(url + "/v1/chat/completions",
                            json={"messages": CONVS[0], "max_tokens": 3, "stop": "zzz",
                                  "logprobs": True, "temperature": 0})
        data = r.json()
        assert r.status_code == 200 and data["usage"]["completion_tokens"] == 3
        assert data["usage"]["total_tokens"] == data["usage"]["prompt_tokens"] + 3
        assert len(data["choices"][0]["logprobs"]["content"]) == 3
    # a backend error (prompt longer than the model's context) reaches the client as a 400
    client = OpenAIBackend(url + "/v1", "tiny", retries=2, backoff=0.01)
    with pytest.raises(LLMError, match="HTTP 400: prompt has .* maximum context length is 512"):
        await client.generate([[{"role": "user", "content": "word " * 600}]], SamplingParams())
    await client.aclose()


async def test_concurrency_limit_is_honoured(serve_app):
    state = {"now": 0, "max": 0, "seen": 0}
    app = FastAPI()

    @app.post("/v1/chat/completions")
    async def chat(_: Request):
        state["now"] += 1
        state["seen"] += 1
        state["max"] = max(state["max"], state["now"])
        await asyncio.sleep(0.05)
        state["now"] -= 1
        return _ok()

    with serve_app(app) as url:
        client = OpenAIBackend(url + "/v1", "fake", max_concurrency=3)
        out = await client.generate(CONVS * 4, SamplingParams())
        await client.aclose()
    assert len(out) == 12 and state["seen"] == 12
    assert state["max"] == 3
    assert out[0].text == "<answer>Paris</answer>"
    assert (out[0].prompt_tokens, out[0].completion_tokens) == (7, 3)


async def test_retries_on_503_then_succeeds_and_honours_retry_after(serve_app):
    calls = []
    app = FastAPI()

    @app.post("/v1/chat/completions")
    async def chat(request: Request):
        calls.append((time.monotonic(), await request.json()))
        if len(calls) == 1:
            return JSONResponse({"error": {"message": "busy"}}, 503)
        if len(calls) == 2:
            return JSONResponse({"error": {"message": "slow down"}}, 429,
                                headers={"Retry-After": "0.3"})
        return _ok()

    with serve_app(app) as url:
        client = OpenAIBackend(url + "/v1", "fake", retries=3, backoff=0.01)
        p = SamplingParams(temperature=0.7, top_p=0.9, max_tokens=5, stop=("</answer>",), seed=4,
                           logprobs=True)
        [c] = await client.generate(CONVS[:1], p)
        await client.aclose()
    assert c.text == "<answer>Paris</answer>" and len(calls) == 3
    assert calls[2][0] - calls[1][0] >= 0.29  # waited as Retry-After asked
    body = calls[0][1]
    assert body["temperature"] == 0.7 and body["top_p"] == 0.9 and body["max_tokens"] == 5
    assert body["stop"] == ["</answer>"] and body["seed"] == 4 and body["logprobs"] is True
    assert body["model"] == "fake" and body["messages"] == CONVS[0]


async def test_client_errors_are_not_retried(serve_app):
    calls = []
    app = FastAPI()

    @app.post("/v1/chat/completions")
    async def chat(_: Request):
        calls.append(1)
        return JSONResponse({"error": {"message": "model 'x' does not exist"}}, 404)

    with serve_app(app) as url:
        client = OpenAIBackend(url + "/v1", "x", retries=3, backoff=0.01)
        with pytest.raises(LLMError, match="HTTP 404: model 'x' does not exist"):
            await client.generate(CONVS[:1], SamplingParams())
        await client.aclose()
    assert len(calls) == 1


async def test_server_that_never_answers_times_out(serve_app):
    app = FastAPI()

    @app.post("/v1/chat/completions")
    async def chat(_: Request):
        await asyncio.sleep(5)
        return _ok()

    with serve_app(app) as url:
        client = OpenAIBackend(url + "/v1", "fake", timeout=0.3, retries=1, backoff=0.01)
        t0 = time.monotonic()
        with pytest.raises(LLMError, match=r"chat/completions.*2 attempt.*timed out after 0.3s"):
            await client.generate(CONVS[:1], SamplingParams())
        assert time.monotonic() - t0 < 3
        await client.aclose()


async def test_closed_port_is_a_connection_error(free_port):
    url = f"http://127.0.0.1:{free_port()}/v1"
    client = OpenAIBackend(url, "fake", retries=2, backoff=0.01)
    t0 = time.monotonic()
    with pytest.raises(LLMError, match=r"127\.0\.0\.1.*3 attempt.*connection error"):
        await client.generate(CONVS[:1], SamplingParams())
    assert time.monotonic() - t0 < 3
    await client.aclose()


async def test_malformed_success_response_is_an_error(serve_app):
    app = FastAPI()

    @app.post("/v1/chat/completions")
    async def chat(_: Request):
        return {"choices": []}

    with serve_app(app) as url:
        client = OpenAIBackend(url + "/v1", "fake", retries=0)
        with pytest.raises(LLMError, match="no choices"):
            await client.generate(CONVS[:1], SamplingParams())
        await client.aclose()


async def test_min_tokens_travels_to_the_server(tiny_server):
    url, served = tiny_server
    client = OpenAIBackend(url + "/v1", "tiny", token_ids=True)
    p = SamplingParams(max_tokens=12, logprobs=True)
    assert "min_tokens" not in client.body(CONVS[0], p)
    assert client.body(CONVS[0], p.replace(min_tokens=2))["min_tokens"] == 2
    [full] = await client.generate(CONVS[:1], p)
    # the text of the first k tokens, a whole string found nowhere after them
    for k in range(1, 6):
        head = served.tokenizer.decode(full.token_ids[:k], skip_special_tokens=True)
        if head and "\ufffd" not in head and head not in full.text[len(head):]:
            break
    assert full.text.startswith(head) and head not in full.text[len(head):]
    [cut] = await client.generate(CONVS[:1], p.replace(stop=(head,)))
    assert cut.text == ""
    # the server does not let a stop string within the first k tokens end the reply
    [kept] = await client.generate(CONVS[:1], p.replace(stop=(head,), min_tokens=k))
    assert kept.token_ids == full.token_ids and kept.text == full.text
    await client.aclose()
