import asyncio

import pytest
import torch

from marag.llm.base import LLM, LLMError, SamplingParams
from marag.llm.hf_local import HFBackend

QUESTIONS = [
    "What is the capital of France?",
    "Who wrote Hamlet?",
    "hi",
    "Document0: The Eiffel Tower is in Paris. Document1: Mount Everest is in Nepal. Which?",
    "<workflow>R, AG</workflow>",
]
CONVS = [[{"role": "system", "content": "Be brief."}, {"role": "user", "content": q}]
         for q in QUESTIONS]


@pytest.fixture()
def backend(tiny):
    model, tok = tiny
    return HFBackend("tiny", model=model, tokenizer=tok, max_batch_size=16, batch_wait_ms=20)


async def test_batched_greedy_equals_one_by_one(backend):
    assert isinstance(backend, LLM)
    p = SamplingParams(max_tokens=24)
    alone = [(await backend.generate([c], p))[0] for c in CONVS]
    assert backend.batches_run == len(CONVS)
    together = await backend.generate(CONVS, p)
    assert backend.batches_run == len(CONVS) + 1  # all five in one forward batch
    for a, b in zip(alone, together):
        assert a.token_ids == b.token_ids
        assert a.text == b.text
        assert a.logprobs == pytest.approx(b.logprobs, abs=1e-4)


async def test_concurrent_callers_share_batches(backend):
    p = SamplingParams(max_tokens=8)
    results = await asyncio.gather(*(backend.generate([c], p) for c in CONVS * 2))
    assert len(results) == 10 and all(len(r) == 1 for r in results)
    assert backend.rows_run == 10
    assert backend.batches_run < 10


async def test_token_counts_text_and_logprobs_match_the_model(backend, tiny):
    model, tok = tiny
    [c] = await backend.generate([CONVS[0]], SamplingParams(max_tokens=12))
    text = tok.apply_chat_template(CONVS[0], add_generation_prompt=True, tokenize=False)
    prompt_ids = tok(text, add_special_tokens=False)["input_ids"]
    assert c.prompt_token_ids == prompt_ids and c.prompt_tokens == len(prompt_ids)
    assert c.completion_tokens == len(c.token_ids) == len(c.logprobs) == 12
    assert c.finish_reason == "length"
    assert c.text == tok.decode(c.token_ids, skip_special_tokens=True)
    # teacher-forced recomputation: the logprob of each generated token under the full model
    ids = torch.tensor([prompt_ids + c.token_ids])
    with torch.no_grad():
        logits = model(ids).logits[0, len(prompt_ids) - 1:-1]
    expected = torch.log_softmax(logits.float(), -1)[torch.arange(12), torch.tensor(c.token_ids)]
    assert c.logprobs == pytest.approx(expected.tolist(), abs=1e-4)
    assert c.token_ids == logits.argmax(-1).tolist()  # greedy


async def test_sampled_logprobs_are_under_the_temperature(backend, tiny):
    model, _ = tiny
    p = SamplingParams(max_tokens=6, temperature=0.5, seed=11)
    [c] = await backend.generate([CONVS[1]], p)
    ids = torch.tensor([c.prompt_token_ids + c.token_ids])
    with torch.no_grad():
        logits = model(ids).logits[0, c.prompt_tokens - 1:-1]
    expected = torch.log_softmax(logits / 0.5, -1)[torch.arange(6), torch.tensor(c.token_ids)]
    assert c.logprobs == pytest.approx(expected.tolist(), abs=1e-4)


async def test_seeded_sampling_is_reproducible_alone_or_batched(backend):
    p = SamplingParams(max_tokens=16, temperature=1.0, seed=123)
    [alone] = await backend.generate([CONVS[2]], p)
    batched = await backend.generate([CONVS[0], CONVS[2], CONVS[3]], p)
    assert batched[1].token_ids == alone.token_ids
    [other] = await backend.generate([CONVS[2]], p.replace(seed=124))
    assert other.token_ids != alone.token_ids
    # a vanishing top_p keeps only the best token: sampling degenerates to greedy
    [narrow] = await backend.generate([CONVS[2]], p.replace(top_p=1e-9))
    [greedy] = await backend.generate([CONVS[2]], SamplingParams(max_tokens=16))
    assert narrow.token_ids == greedy.token_ids


async def test_stop_strings_cut_text_and_end_the_row_early(backend):
    [full] = await backend.generate([CONVS[0]], SamplingParams(max_tokens=30))
    stop = full.text[6:9]
    assert len(stop) == 3 and full.text.index(stop) <= 6
    cut, untouched = await backend.generate(
        [CONVS[0], CONVS[1]], SamplingParams(max_tokens=30, stop=(stop, "never-seen")))
    assert cut.text == full.text[: full.text.index(stop)]
    assert cut.finish_reason == "stop"
    assert cut.completion_tokens < full.completion_tokens
    assert cut.token_ids == full.token_ids[: cut.completion_tokens]
    [plain] = await backend.generate([CONVS[1]], SamplingParams(max_tokens=30))
    assert untouched.token_ids == plain.token_ids  # other rows keep decoding


async def test_stop_when_ends_the_row_and_keeps_its_text(backend, caplog):
    [full] = await backend.generate([CONVS[0]], SamplingParams(max_tokens=30))
    [plain] = await backend.generate([CONVS[1]], SamplingParams(max_tokens=30))
    assert len(full.text) > 8
    seen: list[str] = []

    def enough(text: str) -> bool:
        seen.append(text)
        return len(text) >= 8

    # a row asked to stop beside a row that is not, in one batch
    (cut,), (untouched,) = await asyncio.gather(
        backend.generate([CONVS[0]], SamplingParams(max_tokens=30, stop_when=enough)),
        backend.generate([CONVS[1]], SamplingParams(max_tokens=30)))
    assert cut.finish_reason == "stop" and cut.completion_tokens < full.completion_tokens
    assert cut.token_ids == full.token_ids[: cut.completion_tokens]
    assert full.text.startswith(cut.text) and len(cut.text) >= 8  # kept whole, not cut
    assert len(backend.tokenizer.decode(cut.token_ids[:-1], skip_special_tokens=True)) < 8
    assert untouched.token_ids == plain.token_ids  # the other row decodes on to its end
    # asked after min_tokens only
    seen.clear()
    [late] = await backend.generate([CONVS[0]], SamplingParams(
        max_tokens=30, min_tokens=4, stop_when=lambda t: seen.append(t) or True))
    assert late.completion_tokens == 4 and len(seen) == 1
    # a stop string inside the first token wins over a predicate that is always True
    first = backend.tokenizer.decode(full.token_ids[:1], skip_special_tokens=True)
    [both] = await backend.generate([CONVS[0]], SamplingParams(
        max_tokens=30, stop=(first[-1],), stop_when=lambda t: True))
    assert both.text == first[: first.index(first[-1])] and both.completion_tokens == 1
    # a predicate that raises is switched off for the row, which decodes as without it
    def broken(text: str) -> bool:
        raise KeyError("oops")

    [safe] = await backend.generate([CONVS[0]], SamplingParams(max_tokens=30, stop_when=broken))
    assert safe.token_ids == full.token_ids and "oops" in caplog.text


def test_stop_when_waits_for_a_whole_character():
    from marag.llm.hf_decode import BatchDecoder, Row

    row = Row([1, 2], SamplingParams(stop_when=lambda t: True))
    assert not BatchDecoder._settled(row, "cf. \ufffd")  # the next token may complete it
    assert BatchDecoder._settled(row, "cf. \u017a")


async def test_allowed_text_restricts_tokens(backend, tiny):
    _, tok = tiny
    allowed = ("<id>", "</id>", "0", "1", "2", ", ")
    [c] = await backend.generate([CONVS[3]], SamplingParams(max_tokens=20, allowed_text=allowed))
    ok = {t for s in allowed for t in tok(s, add_special_tokens=False)["input_ids"]}
    ok.add(tok.eos_token_id)
    assert c.token_ids and set(c.token_ids) <= ok
    assert set(c.text) <= set("".join(allowed))
    # only EOS allowed: the row ends at once with an empty answer
    [e] = await backend.generate([CONVS[3]], SamplingParams(max_tokens=20,
                                                             allowed_text=("<|im_end|>",)))
    assert e.token_ids == [tok.eos_token_id] and e.text == "" and e.finish_reason == "stop"


async def test_min_tokens_keeps_end_of_text_and_stop_strings_away_at_first(backend, tiny):
    _, tok = tiny
    zero = tok("0", add_special_tokens=False)["input_ids"]
    allowed = ("<|im_end|>", "0")
    # only end of text or "0": the first three tokens cannot end the reply
    [c] = await backend.generate([CONVS[3]], SamplingParams(max_tokens=6, allowed_text=allowed,
                                                             min_tokens=3))
    assert c.token_ids[:3] == zero * 3 and len(c.token_ids) >= 3
    # the reported logprobs are the model's own over the allowed tokens, end of text
    # included (what a trainer recomputes; vLLM reports them so too)
    model, _ = tiny
    ids = torch.tensor([c.prompt_token_ids + c.token_ids])
    with torch.no_grad():
        logits = model(ids).logits[0, c.prompt_tokens - 1:-1].float()
    keep = torch.full_like(logits, float("-inf"))
    ok = zero + [tok.eos_token_id]
    keep[:, ok] = logits[:, ok]
    expected = torch.log_softmax(keep, -1)[torch.arange(len(c.token_ids)), torch.tensor(c.token_ids)]
    assert c.logprobs == pytest.approx(expected.tolist(), abs=1e-4)
    assert all(lp < 0 for lp in c.logprobs[:3])
    [sampled] = await backend.generate([CONVS[3]], SamplingParams(
        max_tokens=6, allowed_text=allowed, min_tokens=3, temperature=1.0, seed=3))
    assert sampled.token_ids[:3] == zero * 3
    # end of text is all it may write: it still ends, with a finite logprob
    [e] = await backend.generate([CONVS[3]], SamplingParams(
        max_tokens=6, allowed_text=("<|im_end|>",), min_tokens=2))
    assert e.token_ids == [tok.eos_token_id] and e.logprobs == [0.0]
    with pytest.raises(ValueError, match="min_tokens"):
        SamplingParams(min_tokens=-1)
    # a stop string written within the first min_tokens tokens does not end the reply
    [full] = await backend.generate([CONVS[0]], SamplingParams(max_tokens=20))
    head = tok.decode(full.token_ids[:1], skip_special_tokens=True)
    assert head and head not in full.text[len(head):]
    [cut] = await backend.generate([CONVS[0]], SamplingParams(max_tokens=20, stop=(head,)))
    assert cut.text == "" and cut.finish_reason == "stop"
    [kept] = await backend.generate([CONVS[0]], SamplingParams(max_tokens=20, stop=(head,),
                                                                min_tokens=1))
    assert kept.token_ids == full.token_ids and kept.text == full.text


async def test_bad_requests_fail_clearly(backend):
    with pytest.raises(LLMError, match="prompt has .* tokens"):
        await backend.generate([[{"role": "user", "content": "word " * 600}]], SamplingParams())
    with pytest.raises(LLMError, match="max_tokens"):
        await backend.generate(CONVS[:1], SamplingParams(max_tokens=0))
    # the worker survives and still answers
    [c] = await backend.generate(CONVS[:1], SamplingParams(max_tokens=2))
    assert c.completion_tokens == 2
    await backend.aclose()


def test_backend_works_across_event_loops(backend):
    p = SamplingParams(max_tokens=3)
    first = asyncio.run(backend.generate(CONVS[:1], p))
    second = asyncio.run(backend.generate(CONVS[:1], p))
    assert first[0].token_ids == second[0].token_ids


def test_model_and_tokenizer_must_come_together(tiny):
    with pytest.raises(LLMError, match="both"):
        HFBackend("x", model=tiny[0])


async def test_requests_join_a_running_batch_and_leave_when_done(tiny):
    model, tok = tiny
    backend = HFBackend("tiny", model=model, tokenizer=tok, max_batch_size=4, batch_wait_ms=0)
    long_p, short_p = SamplingParams(max_tokens=200), SamplingParams(max_tokens=5)
    [long_alone] = await backend.generate([CONVS[3]], long_p)
    shorts_alone = [(await backend.generate([c], short_p))[0] for c in CONVS[:3]]
    before = backend.batches_run

    long_task = asyncio.create_task(backend.generate([CONVS[3]], long_p))
    while backend.batches_run == before:
        await asyncio.sleep(0.001)
    shorts = await asyncio.gather(*(backend.generate([c], short_p) for c in CONVS[:3]))
    assert not long_task.done()  # the short ones were answered while the long one ran
    [long_joined] = await long_task
    assert backend.batches_run - before >= 2
    assert long_joined.token_ids == long_alone.token_ids
    for [s], alone in zip(shorts, shorts_alone):
        assert s.token_ids == alone.token_ids
        assert s.logprobs == pytest.approx(alone.logprobs, abs=1e-4)


async def test_tokenizer_without_chat_template_uses_plain_layout(tiny, caplog):
    from marag.llm.tiny import build_tiny_tokenizer

    tok = build_tiny_tokenizer()
    tok.chat_template = None
    backend = HFBackend("base", model=tiny[0], tokenizer=tok)
    convo = [{"role": "user", "content": "hi"}]
    assert backend.encode(convo) == tok("user: hi\nassistant:")["input_ids"]
    assert "no chat template" in caplog.text
    [c] = await backend.generate([convo], SamplingParams(max_tokens=4))
    assert c.prompt_tokens == len(backend.encode(convo)) and c.completion_tokens <= 4


def test_prefill_groups_bound_padding():
    from marag.llm.hf_decode import Row, _length_groups

    rows = [Row([0] * n, SamplingParams()) for n in (500, 10, 12, 480, 11, 60)]
    groups = _length_groups(rows)
    assert sorted(len(r.prompt_ids) for g in groups for r in g) == [10, 11, 12, 60, 480, 500]
    for g in groups:
        lengths = [len(r.prompt_ids) for r in g]
        assert len(g) * max(lengths) <= 1.3 * sum(lengths)
    assert [len(g) for g in groups] == [3, 1, 2]


async def test_cancelled_request_leaves_the_batch(tiny):
    model, tok = tiny
    backend = HFBackend("tiny", model=model, tokenizer=tok, batch_wait_ms=0)
    task = asyncio.create_task(backend.generate([CONVS[3]], SamplingParams(max_tokens=400)))
    while backend.batches_run == 0:
        await asyncio.sleep(0.001)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    [c] = await backend.generate([CONVS[0]], SamplingParams(max_tokens=3))
    assert c.completion_tokens == 3
    assert backend._decoder.dropped == 1 and not backend._in_flight
