"""serve-llm driven by the official ``openai`` SDK against the tiny model: plain and streamed
chat and text completions, logprobs, aliases, errors, and cancellation on disconnect."""

from __future__ import annotations

import asyncio
import threading

import httpx
import openai
import pytest

from marag.llm.base import SamplingParams
from marag.llm.hf_local import HFBackend
from marag.llm.server import TextStream, safe_text
from marag.types import Completion

ALIASES = ["tiny", "gpt-4o-mini"]
HI = [{"role": "user", "content": "hi there"}]  # the tiny model runs 171 tokens before EOS


@pytest.fixture(scope="module")
def served(tiny, serve_app):
    from marag.llm.server import create_app

    model, tok = tiny
    backend = HFBackend("tiny", model=model, tokenizer=tok, batch_wait_ms=5)
    with serve_app(create_app(backend, ALIASES)) as url:
        yield url, backend


@pytest.fixture
def sdk(served):
    client = openai.OpenAI(base_url=served[0] + "/v1", api_key="unused", max_retries=0)
    yield client
    client.close()


async def direct(backend: HFBackend, messages, **kw) -> Completion:
    [c] = await HFBackend("tiny", model=backend.module, tokenizer=backend.tokenizer).generate(
        [messages], SamplingParams(**kw))
    return c


def test_plain_chat_matches_the_backend(served, sdk):
    _, backend = served
    r = sdk.chat.completions.create(model="tiny", messages=HI, max_tokens=40, temperature=0)
    want = asyncio.run(direct(backend, HI, max_tokens=40))
    assert r.object == "chat.completion" and r.model == "tiny"
    assert r.choices[0].message.content == want.text and r.choices[0].message.role == "assistant"
    assert r.choices[0].finish_reason == want.finish_reason == "length"
    assert (r.usage.prompt_tokens, r.usage.completion_tokens) == (want.prompt_tokens, 40)
    assert r.usage.total_tokens == r.usage.prompt_tokens + 40


def test_streamed_chat_equals_the_greedy_text(sdk):
    plain = sdk.chat.completions.create(model="tiny", messages=HI, max_tokens=120, temperature=0)
    stream = sdk.chat.completions.create(model="tiny", messages=HI, max_tokens=120,
                                         temperature=0, stream=True,
                                         stream_options={"include_usage": True})
    chunks = list(stream)
    assert all(c.object == "chat.completion.chunk" and c.model == "tiny" for c in chunks)
    assert len({c.id for c in chunks}) == 1
    assert chunks[0].choices[0].delta.role == "assistant"
    deltas = [c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta.content]
    assert len(deltas) > 10  # token by token, not one lump at the end
    assert "".join(deltas) == plain.choices[0].message.content
    finish = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert finish == [plain.choices[0].finish_reason]
    # usage only in the last chunk, which has no choices
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == 120
    assert chunks[-1].usage.prompt_tokens == plain.usage.prompt_tokens
    assert all(c.usage is None for c in chunks[:-1])
    # without include_usage no usage chunk is sent
    bare = list(sdk.chat.completions.create(model="tiny", messages=HI, max_tokens=5, stream=True))
    assert all(c.usage is None and c.choices for c in bare)


def test_stop_strings_never_leak_into_the_stream(served, sdk):
    plain = sdk.chat.completions.create(model="tiny", messages=HI, max_tokens=80, temperature=0)
    text = plain.choices[0].message.content
    stop = text[20:23]  # a string the greedy answer is known to contain
    cut = text[: text.find(stop)]
    r = sdk.chat.completions.create(model="tiny", messages=HI, max_tokens=80, temperature=0,
                                    stop=[stop])
    assert r.choices[0].message.content == cut and r.choices[0].finish_reason == "stop"
    stream = sdk.chat.completions.create(model="tiny", messages=HI, max_tokens=80, temperature=0,
                                         stop=[stop], stream=True)
    assert "".join(c.choices[0].delta.content or "" for c in stream) == cut


def test_a_stop_string_min_tokens_excuses_streams_as_it_comes(served, sdk, tiny):
    _, tok = tiny
    full = asyncio.run(direct(served[1], HI, max_tokens=40, temperature=0))
    k = len(tok.decode(full.token_ids[:4], skip_special_tokens=True))
    # a stop string that ends where the first 4 tokens' text ends and is not written again
    head = next(full.text[k - j:k] for j in (2, 3, 4, 5, 6) if full.text[k - j:k].strip()
                and full.text[k - j:k] not in full.text[k - j + 1:])
    cut = sdk.chat.completions.create(model="tiny", messages=HI, max_tokens=40, temperature=0,
                                      stop=[head])
    assert len(cut.choices[0].message.content) < k  # without min_tokens it ends the reply
    stream = sdk.chat.completions.create(model="tiny", messages=HI, max_tokens=40, temperature=0,
                                         stop=[head], stream=True,
                                         extra_body={"min_tokens": 4})
    pieces = [c.choices[0].delta.content for c in stream if c.choices[0].delta.content]
    assert "".join(pieces) == full.text
    # the text past the excused stop string was sent as it came, not held back to the end
    assert len("".join(pieces[:-1])) > k


def test_safe_text_holds_back_what_may_still_change():
    assert safe_text("hello wor", ("world!",)) == "hello"  # a stop string may be starting
    assert safe_text("hello world! more", ("world!",)) == "hello"
    assert safe_text("caf\ufffd", ()) == "caf"  # half a UTF-8 character
    assert safe_text("a b ", ()) == "a b"  # a space a clean-up may still drop
    assert safe_text("a\ufffdb", ()) == "a\ufffdb"
    # a stop string that ends within the first min_tokens tokens' text does not count
    assert safe_text("abSTOPcd", ("STOP",), start=6) == "abSTOPcd"
    assert safe_text("abSTOPcd", ("STOP",), start=5) == "ab"  # it ends after them: it counts
    # a stop string may begin before what a later token may still change
    assert safe_text("xP ", ("P.",)) == "x"  # " ." is cleaned up to "."
    assert safe_text("ab\ufffd", ("bé",)) == "a"  # the \ufffd may become é


class _Pieces:
    """A tokenizer whose token i decodes to PIECES[i]."""
    PIECES = ("ab", "STOP", "cd", "STOP", "ef")

    def decode(self, ids, skip_special_tokens=True):
        return "".join(self.PIECES[i] for i in ids)


def test_streamed_text_is_not_held_back_by_a_stop_string_min_tokens_excuses():
    """The decoder ignores a stop string inside the first min_tokens tokens; the stream sends
    that text as it comes, and stops sending at the first stop string that counts."""
    stream = TextStream(_Pieces(), ("STOP",), min_tokens=2)
    deltas = [stream.push(i) for i in range(4)]
    assert deltas == ["ab", "STOP", "cd", ""]
    assert stream.finish("abSTOPcd") == ""
    # before min_tokens tokens have come, a stop string already written is excused too
    early = TextStream(_Pieces(), ("STOP",), min_tokens=3)
    assert [early.push(i) for i in range(4)] == ["ab", "STOP", "cd", ""]
    plain = TextStream(_Pieces(), ("STOP",))
    assert [plain.push(i) for i in range(3)] == ["ab", "", ""]


def test_top_logprobs(served, sdk):
    r = sdk.chat.completions.create(model="tiny", messages=HI, max_tokens=12, temperature=0,
                                    logprobs=True, top_logprobs=3)
    content = r.choices[0].logprobs.content
    assert len(content) == 12
    for entry in content:
        tops = entry.top_logprobs
        assert len(tops) == 3
        assert [t.logprob for t in tops] == sorted((t.logprob for t in tops), reverse=True)
        assert all(t.logprob <= 0 for t in tops)
        # greedy: the chosen token is the most likely one, with the same logprob
        assert tops[0].logprob == pytest.approx(entry.logprob, abs=1e-6)
        assert tops[0].token == entry.token and bytes(entry.bytes).decode("utf-8", "replace")
    streamed = sdk.chat.completions.create(model="tiny", messages=HI, max_tokens=12,
                                           temperature=0, logprobs=True, top_logprobs=2,
                                           stream=True)
    entries = [e for c in streamed if c.choices and c.choices[0].logprobs
               for e in c.choices[0].logprobs.content]
    assert [e.logprob for e in entries] == pytest.approx([e.logprob for e in content], abs=1e-6)
    assert all(len(e.top_logprobs) == 2 for e in entries)
    # without logprobs there are none; top_logprobs alone is an error
    plain = sdk.chat.completions.create(model="tiny", messages=HI, max_tokens=3)
    assert plain.choices[0].logprobs is None
    with pytest.raises(openai.BadRequestError, match="top_logprobs needs logprobs"):
        sdk.chat.completions.create(model="tiny", messages=HI, max_tokens=3, top_logprobs=2)


def test_list_content_and_null_assistant_content(served, sdk):
    parts = [{"type": "text", "text": "What is"}, {"type": "text", "text": "the capital?"}]
    history = [{"role": "developer", "content": "Be brief."},
               {"role": "user", "content": parts},
               {"role": "assistant", "content": None},
               {"role": "user", "content": "and again"}]
    r = sdk.chat.completions.create(model="tiny", messages=history, max_tokens=8, temperature=0)
    same = [{"role": "system", "content": "Be brief."},
            {"role": "user", "content": "What is\nthe capital?"},
            {"role": "assistant", "content": ""},
            {"role": "user", "content": "and again"}]
    want = asyncio.run(direct(served[1], same, max_tokens=8))
    assert r.choices[0].message.content == want.text
    assert r.usage.prompt_tokens == want.prompt_tokens


def test_aliases_and_models_endpoints(served, sdk):
    r = sdk.chat.completions.create(model="gpt-4o-mini", messages=HI, max_tokens=4,
                                    temperature=0)
    assert r.model == "gpt-4o-mini"
    assert r.choices[0].message.content == sdk.chat.completions.create(
        model="tiny", messages=HI, max_tokens=4, temperature=0).choices[0].message.content
    assert [m.id for m in sdk.models.list()] == ALIASES
    assert sdk.models.retrieve("gpt-4o-mini").id == "gpt-4o-mini"
    with pytest.raises(openai.NotFoundError) as e:
        sdk.models.retrieve("gpt-5")
    assert e.value.code == "model_not_found"
    with pytest.raises(openai.NotFoundError, match="does not exist"):
        sdk.chat.completions.create(model="gpt-5", messages=HI, max_tokens=4)


@pytest.mark.parametrize("extra,match", [
    ({"tools": [{"type": "function", "function": {"name": "f", "parameters": {}}}]},
     "tool calling is not supported"),
    ({"tool_choice": "auto"}, "tool calling is not supported"),
    ({"response_format": {"type": "json_object"}}, "response_format 'json_object'"),
    ({"n": 2}, "n=2 is not supported"),
    ({"presence_penalty": 0.5}, "presence_penalty is not supported"),
    ({"max_tokens": 10**9}, "maximum context length is 512 tokens"),
    ({"temperature": 3}, "temperature"),
    ({"messages": [{"role": "tool", "content": "x", "tool_call_id": "1"}]}, "role 'tool'"),
    ({"messages": [{"role": "robot", "content": "x"}]}, "role 'robot' is not supported"),
    ({"messages": [{"role": "user", "content": None}]}, "content is null"),
    ({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}]},
     "only text parts"),
])
def test_unsupported_options_are_400(sdk, extra, match):
    body = {"model": "tiny", "messages": HI, "max_tokens": 4, **extra}
    with pytest.raises(openai.BadRequestError, match=match) as e:
        sdk.chat.completions.create(**body)
    assert e.value.status_code == 400 and e.value.body["message"]


def test_errors_are_openai_shaped_even_for_unknown_paths(served):
    url, _ = served
    for method, path in (("POST", "/v1/embeddings"), ("GET", "/nowhere"),
                         ("GET", "/v1/chat/completions")):
        r = httpx.request(method, url + path)
        assert r.status_code in (404, 405)
        assert set(r.json()) == {"error"} and "Invalid URL" in r.json()["error"]["message"]
    r = httpx.post(url + "/v1/chat/completions", content=b"{oops",
                   headers={"content-type": "application/json"})
    assert r.status_code == 400 and r.json()["error"]["type"] == "invalid_request_error"
    # a model's ignored options (user, metadata) are accepted
    r = httpx.post(url + "/v1/chat/completions", json={
        "model": "tiny", "messages": HI, "max_tokens": 2, "user": "u1", "store": False,
        "metadata": {"a": "b"}, "parallel_tool_calls": False, "tool_choice": "none"})
    assert r.status_code == 200, r.text


def test_text_completions_plain_streamed_and_logprobs(served, sdk):
    _, backend = served
    prompt = "The capital of France is"
    r = sdk.completions.create(model="gpt-4o-mini", prompt=prompt, max_tokens=30,
                               temperature=0, logprobs=2)
    assert r.object == "text_completion" and r.model == "gpt-4o-mini"
    choice = r.choices[0]
    assert r.usage.prompt_tokens == len(backend.tokenizer(prompt)["input_ids"])
    assert r.usage.completion_tokens == len(choice.logprobs.tokens) <= 30
    # distinct tokens may share a text (a lone byte prints as U+FFFD), and a dict keeps one
    assert all(1 <= len(t) <= 2 for t in choice.logprobs.top_logprobs)
    as_ids = sdk.completions.create(model="tiny", prompt=prompt, max_tokens=30, temperature=0,
                                    logprobs=2, extra_body={"return_tokens_as_token_ids": True})
    assert all(len(t) == 2 for t in as_ids.choices[0].logprobs.top_logprobs)
    assert as_ids.choices[0].logprobs.tokens[0].startswith("token_id:")
    assert choice.logprobs.text_offset[0] == 0
    streamed = list(sdk.completions.create(model="tiny", prompt=prompt, max_tokens=30,
                                           temperature=0, stream=True))
    assert "".join(c.choices[0].text for c in streamed) == choice.text
    assert streamed[-1].choices[0].finish_reason == choice.finish_reason
    # several prompts in one request: one choice each, in order
    many = sdk.completions.create(model="tiny", prompt=[prompt, "Hamlet was written by"],
                                  max_tokens=5, temperature=0)
    assert [c.index for c in many.choices] == [0, 1]
    assert many.choices[0].text == sdk.completions.create(
        model="tiny", prompt=prompt, max_tokens=5, temperature=0).choices[0].text
    with pytest.raises(openai.BadRequestError, match="echo is not supported"):
        sdk.completions.create(model="tiny", prompt=prompt, max_tokens=2, echo=True)
    with pytest.raises(openai.BadRequestError, match="token-id prompts"):
        sdk.completions.create(model="tiny", prompt=[1, 2, 3], max_tokens=2)


# ----------------------------------------------------------------------------- disconnects


class Gate:
    """Lets the decoder take a forward pass only when the test says so, so a test can hold a
    request in mid-generation and count decoding steps instead of timing them."""

    def __init__(self, backend: HFBackend) -> None:
        self.sem = threading.Semaphore(0)
        self.opened = False
        inner = backend._decoder._forward

        def forward(*args, **kwargs):
            if not self.opened:
                assert self.sem.acquire(timeout=60), "test never released the decoder"
            return inner(*args, **kwargs)

        backend._decoder._forward = forward

    def step(self, n: int = 1) -> None:
        self.sem.release(n)

    def open(self) -> None:
        self.opened = True
        self.sem.release(1000)


@pytest.fixture
def gated(tiny, serve_app):
    from marag.llm.server import create_app

    model, tok = tiny
    backend = HFBackend("tiny", model=model, tokenizer=tok, batch_wait_ms=0)
    gate = Gate(backend)
    with serve_app(create_app(backend)) as url:
        yield url, backend, gate
        gate.open()


async def until(check, what: str, gate: Gate | None = None, limit: int = 400) -> None:
    """Poll ``check`` (optionally letting the decoder take a step between polls)."""
    for _ in range(limit):
        if check():
            return
        if gate is not None:
            gate.step()
        await asyncio.sleep(0.02)
    raise AssertionError(f"gave up waiting for {what}")


async def next_text(stream, gate: Gate) -> str:
    """The next streamed text delta, letting the decoder step while waiting for it."""
    it = stream.__aiter__()
    while True:
        task = asyncio.ensure_future(it.__anext__())
        while not task.done():
            gate.step()
            await asyncio.wait({task}, timeout=0.05)
        chunk = task.result()
        if chunk.choices and chunk.choices[0].delta.content:
            return chunk.choices[0].delta.content


async def test_chunks_arrive_while_the_request_is_still_decoding(gated):
    url, backend, gate = gated
    client = openai.AsyncOpenAI(base_url=url + "/v1", api_key="unused", max_retries=0)
    stream = await client.chat.completions.create(model="tiny", messages=HI, max_tokens=100,
                                                  temperature=0, stream=True)
    got = [await next_text(stream, gate)]
    assert len(backend._in_flight) == 1  # the row is still in the batch
    before = backend._decoder.steps
    gate.open()
    async for chunk in stream:
        if chunk.choices and chunk.choices[0].delta.content:
            got.append(chunk.choices[0].delta.content)
    assert backend._decoder.steps > before
    want = await direct(backend, HI, max_tokens=100)
    assert "".join(got) == want.text
    await client.close()


async def test_streamed_request_stops_generating_when_the_client_goes(gated):
    url, backend, gate = gated
    client = openai.AsyncOpenAI(base_url=url + "/v1", api_key="unused", max_retries=0)
    stream = await client.chat.completions.create(model="tiny", messages=HI, max_tokens=400,
                                                  temperature=0, stream=True)
    assert await next_text(stream, gate)
    assert len(backend._in_flight) == 1
    dropped = backend.abandoned_rows
    await stream.close()  # the client goes away mid-answer
    await until(lambda: backend.abandoned_rows == dropped + 1, "the row to be dropped", gate)
    lag, tokens = backend.last_abandoned
    assert lag <= 2, f"the row stayed {lag} steps after its request was cancelled"
    assert tokens < 40  # far from its 400 tokens (greedy would run 171 before EOS)
    assert not backend._in_flight
    await client.close()


async def test_unstreamed_request_stops_generating_when_the_client_goes(gated):
    url, backend, gate = gated
    dropped = backend.abandoned_rows
    async with httpx.AsyncClient(base_url=url) as http:
        task = asyncio.ensure_future(http.post("/v1/chat/completions", json={
            "model": "tiny", "messages": HI, "max_tokens": 400, "temperature": 0}))
        start = backend._decoder.steps
        await until(lambda: backend._decoder.steps >= start + 3, "decoding to start", gate)
        task.cancel()  # as a client timeout does: the connection is closed
        with pytest.raises(asyncio.CancelledError):
            await task
    await until(lambda: backend.abandoned_rows == dropped + 1, "the row to be dropped", gate)
    lag, tokens = backend.last_abandoned
    assert lag <= 2 and tokens < 40
    assert not backend._in_flight
    # the server goes on serving
    gate.open()
    async with httpx.AsyncClient(base_url=url, timeout=30) as http:
        r = await http.post("/v1/chat/completions",
                            json={"messages": HI, "max_tokens": 3, "temperature": 0})
    assert r.status_code == 200 and r.json()["usage"]["completion_tokens"] == 3

