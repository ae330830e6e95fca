"""One request that cannot be decoded fails alone: the rows batched beside it finish with the
output they have when sent alone (the decoder, the backend and serve-llm, on the tiny model)."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from marag.llm.base import PromptError, SamplingParams
from marag.llm.hf_decode import BatchDecoder, DecodeResult, Row
from marag.llm.hf_local import HFBackend

QUESTIONS = ["hi there", "what is 2+2?", "name a river", "who wrote Hamlet?"]


def _decode(decoder: BatchDecoder, rows: list[Row]) -> tuple[dict[int, list[int]], dict]:
    out: dict[int, list[int]] = {}
    failed: dict[int, Exception] = {}
    queue = list(rows)

    def admit(n: int) -> list[Row]:
        taken, queue[:] = queue[:n], queue[n:]
        return taken

    def deliver(row: Row, res: DecodeResult) -> None:
        out[row.tag] = res.token_ids

    def fail(row: Row, e: Exception) -> None:
        failed[row.tag] = e

    decoder.run(admit, deliver, max_rows=8, fail=fail)
    return out, failed


def test_decoder_refuses_bad_rows_alone_and_the_rest_decode_as_alone(tiny):
    model, tok = tiny
    decoder = BatchDecoder(model, tok)
    sp = SamplingParams(max_tokens=12)
    prompts = [tok(q)["input_ids"] for q in QUESTIONS]
    alone = [_decode(decoder, [Row(list(p), sp, tag=i)])[0][i] for i, p in enumerate(prompts)]
    bad = {10: [], 11: [decoder.vocab_size + 5, 1, 2],
           12: [1] * (decoder.max_positions or 100_000)}
    rows = [Row(list(p), sp, tag=i) for i, p in enumerate(prompts)]
    rows[2:2] = [Row(list(ids), sp, tag=t) for t, ids in bad.items()]
    out, failed = _decode(decoder, rows)
    assert sorted(failed) == sorted(bad)
    assert all(isinstance(e, PromptError) for e in failed.values())
    assert "empty" in str(failed[10]) and "vocabulary" in str(failed[11])
    assert [out[i] for i in range(len(prompts))] == alone


def test_a_failing_prefill_is_retried_row_by_row(tiny):
    # skip the up-front check to reach the model with a token id it has no embedding for
    model, tok = tiny
    decoder = BatchDecoder(model, tok)
    sp = SamplingParams(max_tokens=6)
    good = [Row(tok(q)["input_ids"], sp, tag=i) for i, q in enumerate(QUESTIONS[:2])]
    broken = Row([decoder.vocab_size + 1, 3], sp, tag=9)
    _prefill_around(decoder, good, broken)


def _prefill_around(decoder: BatchDecoder, good: list[Row], broken: Row) -> None:
    """Prefill ``good[0], broken, good[1]`` as one group: only ``broken`` fails, and the good
    rows come back as a batch each."""
    import torch

    failed: list[Row] = []
    with torch.inference_mode():
        batches = decoder._prefill_alone([good[0], broken, good[1]],
                                         lambda r, e: failed.append(r))
    assert failed == [broken]
    assert [b.rows for b in batches] == [[good[0]], [good[1]]]


def test_a_failing_row_keeps_the_prefills_done_before_it(tiny):
    # with the prefix cache, rows whose prefix is computed prefill one by one: when a later
    # one fails, those done are kept (not computed again) and only the failing row is dropped
    model, tok = tiny
    decoder = BatchDecoder(model, tok, prefix_cache=True)
    sp = SamplingParams(max_tokens=6)
    head = tok("You answer in one word, about rivers and towns.")["input_ids"]
    good = [Row(head + tok(q)["input_ids"], sp, tag=i, prefix_len=len(head))
            for i, q in enumerate(QUESTIONS[:2])]
    other = tok("A different instruction entirely, for the third row.")["input_ids"]
    broken = Row(other + [decoder.vocab_size + 1, 3], sp, tag=9, prefix_len=len(other))
    # the first row whole (its prefix computed and kept), the second on the first's prefix
    _prefill_around(decoder, good, broken)
    # each prefix computed once (the broken row's pass raised before it counted anything)
    assert decoder.stats.prefix_tokens == len(head)
    assert decoder.stats.prefills == 2 and decoder.prefix_cache.misses == 1


@pytest.fixture(scope="module")
def backend(tiny):
    model, tok = tiny
    return HFBackend("tiny", model=model, tokenizer=tok, batch_wait_ms=20)


def test_backend_refuses_an_empty_prompt_before_batching(backend):
    async def go():
        with pytest.raises(PromptError, match="empty"):
            async for _ in backend.stream([], SamplingParams(max_tokens=3)):
                pass

    asyncio.run(go())


def test_four_good_chats_and_one_empty_prompt(tiny, serve_app):
    from marag.llm.server import create_app

    model, tok = tiny
    server_backend = HFBackend("tiny", model=model, tokenizer=tok, batch_wait_ms=20)

    def chat(q: str) -> dict:
        return {"model": "tiny", "messages": [{"role": "user", "content": q}],
                "max_tokens": 16, "temperature": 0}

    async def go(url: str):
        async with httpx.AsyncClient(base_url=url, timeout=120) as client:
            alone = [(await client.post("/v1/chat/completions", json=chat(q))).json()
                     for q in QUESTIONS]
            sent = [client.post("/v1/chat/completions", json=chat(q)) for q in QUESTIONS]
            sent.insert(2, client.post("/v1/completions",
                                       json={"model": "tiny", "prompt": "", "max_tokens": 4}))
            return alone, await asyncio.gather(*sent)

    with serve_app(create_app(server_backend, ["tiny"])) as url:
        alone, answers = asyncio.run(go(url))
    empty = answers.pop(2)
    assert empty.status_code == 400
    err = empty.json()["error"]
    assert set(err) == {"message", "type", "param", "code"}
    assert err["type"] == "invalid_request_error" and err["param"] == "prompt"
    assert [r.status_code for r in answers] == [200] * 4
    assert ([r.json()["choices"][0]["message"]["content"] for r in answers]
            == [a["choices"][0]["message"]["content"] for a in alone])
