"""The shared-prefix KV cache of the hf backend must not change a single output."""

import asyncio

import pytest

from marag.llm.base import SamplingParams
from marag.llm.chat import render_chat
from marag.llm.hf_local import HFBackend

ROLE_A = [{"role": "system", "content": "You answer questions about documents. Be brief."},
          {"role": "user", "content": "What is the capital of Germany?"},
          {"role": "assistant", "content": "<answer>Berlin</answer>"}]
ROLE_B = [{"role": "system", "content": "You split a question into sub-questions."},
          {"role": "user", "content": "Who directed the film that won in 1998?"},
          {"role": "assistant", "content": "<q>Which film won in 1998?</q><q>Who directed it?</q>"}]
QUESTIONS = ["Who wrote Hamlet?", "hi", "Where is Mount Everest, and how high is it?",
             "Document0: The Eiffel Tower is in Paris. Which city?", "<workflow>R, AG</workflow>"]
CONVS = [role + [{"role": "user", "content": q}]
         for q in QUESTIONS for role in (ROLE_A, ROLE_B)]


def _pair(tiny, **kw):
    model, tok = tiny
    on = HFBackend("tiny", model=model, tokenizer=tok, prefix_cache=True, **kw)
    off = HFBackend("tiny", model=model, tokenizer=tok, prefix_cache=False, **kw)
    return on, off


def _same(a, b):
    assert a.token_ids == b.token_ids
    assert a.text == b.text and a.finish_reason == b.finish_reason
    assert a.logprobs == pytest.approx(b.logprobs, abs=1e-4)


async def test_prefix_is_the_conversation_minus_its_last_turn(tiny):
    on, off = _pair(tiny)
    ids = on.encode(CONVS[0])
    n = on.prefix_len(CONVS[0], ids)
    assert 16 <= n < len(ids)
    assert ids[:n] == on.tokenizer(render_chat(on.tokenizer, ROLE_A, False),
                                   add_special_tokens=False)["input_ids"]
    assert off.prefix_len(CONVS[0], ids) == 0  # switched off
    single = [{"role": "user", "content": "hi"}]
    assert on.prefix_len(single, on.encode(single)) == 0


async def test_greedy_outputs_equal_with_and_without_the_cache(tiny):
    on, off = _pair(tiny, batch_wait_ms=20)
    p = SamplingParams(max_tokens=20)
    ref_alone = [(await off.generate([c], p))[0] for c in CONVS]
    ref_batch = await off.generate(CONVS, p)
    alone = [(await on.generate([c], p))[0] for c in CONVS]  # misses first, then hits
    batch = await on.generate(CONVS, p)  # two prefixes in one prefill batch, all hits
    for a, b, c, d in zip(ref_alone, ref_batch, alone, batch):
        _same(c, a)
        _same(d, b)
    cache = on._decoder.prefix_cache
    assert cache.misses == 2 and len(cache) == 2
    assert cache.hits == 2 * len(CONVS) - 2
    assert off._decoder.prefix_cache is None


async def test_seeded_sampling_and_stop_strings_are_unchanged(tiny):
    on, off = _pair(tiny, batch_wait_ms=20)
    p = SamplingParams(max_tokens=16, temperature=0.8, seed=5)
    for a, b in zip(await off.generate(CONVS, p), await on.generate(CONVS, p)):
        _same(a, b)
    [full] = await off.generate([CONVS[0]], SamplingParams(max_tokens=30))
    stop = full.text[4:7]
    ps = SamplingParams(max_tokens=30, stop=(stop, "never-seen"))
    for a, b in zip(await off.generate(CONVS[:4], ps), await on.generate(CONVS[:4], ps)):
        _same(a, b)


async def test_rows_joining_a_running_batch_are_unchanged(tiny):
    on, off = _pair(tiny, max_batch_size=4, batch_wait_ms=0)
    long_p, short_p = SamplingParams(max_tokens=150), SamplingParams(max_tokens=6)
    [ref_long] = await off.generate([CONVS[4]], long_p)
    ref_shorts = [(await off.generate([c], short_p))[0] for c in CONVS[5:9]]
    mixed = [CONVS[5], [{"role": "user", "content": "no prefix here"}], CONVS[7], CONVS[8]]
    [ref_plain] = await off.generate([mixed[1]], short_p)
    ref_shorts[1] = ref_plain

    before = on.batches_run
    long_task = asyncio.create_task(on.generate([CONVS[4]], long_p))
    while on.batches_run == before:
        await asyncio.sleep(0.001)
    shorts = await asyncio.gather(*(on.generate([c], short_p) for c in mixed))
    assert not long_task.done()
    [long_joined] = await long_task
    _same(long_joined, ref_long)
    for [s], ref in zip(shorts, ref_shorts):
        _same(s, ref)
    assert on._decoder.prefix_cache.hits >= 1


def test_cache_is_bounded_lru():
    import torch

    from marag.llm.hf_decode import PrefixCache

    cache = PrefixCache(max_entries=2)
    kv = [(torch.zeros(1), torch.zeros(1))]
    cache.put((1,), kv)
    cache.put((2,), kv)
    assert cache.get((1,)) is kv  # (1,) is now the most recent
    cache.put((3,), kv)
    assert len(cache) == 2 and cache.get((2,)) is None and cache.get((1,)) is kv
    assert cache.reused_tokens == 2


def test_sliding_window_models_get_no_prefix_cache(tiny):
    from transformers import Gemma3ForCausalLM, Gemma3TextConfig

    from marag.llm.hf_decode import BatchDecoder

    config = Gemma3TextConfig(vocab_size=512, hidden_size=32, intermediate_size=64,
                              num_hidden_layers=2, num_attention_heads=2,
                              num_key_value_heads=1, head_dim=16, sliding_window=8,
                              layer_types=["sliding_attention", "full_attention"])
    decoder = BatchDecoder(Gemma3ForCausalLM(config), tiny[1], prefix_cache=True)
    assert not decoder.can_join and decoder.prefix_cache is None


async def test_weights_update_drops_stale_prefix_kv(tiny):
    import torch

    model, tok = tiny
    backend = HFBackend("tiny", model=model, tokenizer=tok, prefix_cache=True, batch_wait_ms=0)
    params = SamplingParams(max_tokens=4)
    before = (await backend.generate([CONVS[0]], params))[0]
    cache = backend._decoder.prefix_cache
    assert len(cache) == 1 and before.weights_version == 0
    head = model.get_output_embeddings()
    saved = head.weight.detach().clone()
    try:
        with torch.no_grad():
            head.weight.add_(torch.randn_like(head.weight))
        assert backend.weights_updated() == 1
        assert len(cache) == 0  # stale KV is gone
        after = (await backend.generate([CONVS[0]], params))[0]
        assert after.weights_version == 1
        fresh = HFBackend("tiny", model=model, tokenizer=tok, prefix_cache=False)
        ref = (await fresh.generate([CONVS[0]], params))[0]
        assert after.token_ids == ref.token_ids
    finally:
        with torch.no_grad():
            head.weight.copy_(saved)


async def test_a_grown_prompt_reuses_the_prefix_it_shares_with_an_entry(tiny):
    # IRCoT's shape: the paragraphs grow by appending, the chain so far is the last turn
    on, off = _pair(tiny)
    paras = ["Wikipedia Title: Paris\nParis is the capital of France and its largest city.",
             "Wikipedia Title: Seine\nThe Seine flows through Paris to the English Channel.",
             "Wikipedia Title: Louvre\nThe Louvre is the most visited museum in the world."]
    convs = [[{"role": "system", "content": "Reason over the paragraphs, one sentence."},
              {"role": "user", "content": "\n\n".join(paras[:k]) + "\n\nQ: Where is the Louvre?"},
              {"role": "assistant", "content": "The Louvre is a museum."}] for k in (1, 2, 3)]
    p = SamplingParams(max_tokens=12)
    for c in convs:
        _same((await on.generate([c], p))[0], (await off.generate([c], p))[0])
    cache, stats = on._decoder.prefix_cache, on._decoder.stats
    keys = [on.prefix_len(c, on.encode(c)) for c in convs]
    assert cache.misses == 3 and cache.partial_hits == 2 and cache.hits == 0
    # the first prefix whole, then only what each later one adds (its last paragraph, Q)
    assert keys[0] < stats.prefix_tokens < sum(keys) - keys[0]
    assert cache.reused_tokens == sum(keys) - stats.prefix_tokens
    # an entry's leading part: no forward pass at all
    head = tuple(on.encode(convs[2])[:20])
    before = stats.prefix_tokens
    n, kv = cache.longest(head)
    assert n == 20 and kv[0][0].shape[2] == 20 and stats.prefix_tokens == before
    assert cache.longest((-1,) * 20) == (0, None)


async def test_a_prompt_starts_from_an_entry_that_holds_more_than_its_leading_turns(tiny):
    # IRCoT's direct reader: the reasoning step's paragraphs and question, then its request
    on, off = _pair(tiny)
    system = {"role": "system", "content": "Reason over the paragraphs, one sentence."}
    user = {"role": "user", "content": "Wikipedia Title: Paris\nParis is the capital of "
            "France and its largest city.\n\nQ: Which city is the capital of France?"}
    step = [system, user, {"role": "assistant", "content": "Paris is a city."}]
    reader = [system, user]
    p = SamplingParams(max_tokens=12)
    _same((await on.generate([step], p))[0], (await off.generate([step], p))[0])
    cache, stats = on._decoder.prefix_cache, on._decoder.stats
    entry = on.prefix_len(step, on.encode(step))  # the step's key: system and paragraphs
    own = on.prefix_len(reader, on.encode(reader))  # the reader's own leading turn
    assert own < entry and len(cache) == 1
    computed, reused = stats.prefix_tokens, cache.reused_tokens
    _same((await on.generate([reader], p))[0], (await off.generate([reader], p))[0])
    # nothing recomputed, nothing stored: the reader's prompt up to its last turn came whole
    # from the step's entry
    assert stats.prefix_tokens == computed and len(cache) == 1
    assert cache.reused_tokens - reused == entry
    assert cache.shared(tuple(on.encode(reader))) == entry
    assert cache.shared((-1,) * 20) == 0


async def test_ircot_direct_reader_reads_its_paragraphs_from_the_last_step(tiny):
    from marag.roles import ircot
    from marag.types import Passage

    on, off = _pair(tiny)
    docs = [Passage("p1", "Louvre", "A museum in Paris.")]  # the tiny model holds 511 tokens
    q = "Where is the Louvre?"
    step = ircot.build(q, docs, ["It is a museum."])
    direct = ircot.build(q, docs, ["It is a museum."], direct=True)
    p = SamplingParams(max_tokens=8)
    await on.generate([step], p)
    cache, stats = on._decoder.prefix_cache, on._decoder.stats
    entry = on.prefix_len(step, on.encode(step))
    own = on.prefix_len(direct, on.encode(direct))  # its leading turns: system and example
    computed, reused = stats.prefix_tokens, cache.reused_tokens
    _same((await on.generate([direct], p))[0], (await off.generate([direct], p))[0])
    held = cache.shared(tuple(on.encode(direct)))
    # the paragraphs and question came from the step's entry, all but the few tokens the
    # tokenizer may merge across the question's end; nothing was computed for the prefix
    assert own < entry - 4 <= held <= entry
    assert cache.reused_tokens - reused == held and stats.prefix_tokens == computed


async def test_cache_prompt_keeps_the_whole_prompt_for_the_next_step(tiny):
    # IRCoT's steps: the first has no chain yet (its leading turns are only the system
    # message); the second adds a paragraph before the question and continues a chain
    on, off = _pair(tiny)
    paras = ["Wikipedia Title: Paris\nParis is the capital of France and its largest city.",
             "Wikipedia Title: Seine\nThe Seine flows through Paris to the English Channel."]
    system = {"role": "system", "content": "Reason over the paragraphs, one sentence."}
    first = [system, {"role": "user", "content": paras[0] + "\n\nQ: Where is the Seine?"}]
    second = [system, {"role": "user", "content": "\n\n".join(paras) + "\n\nQ: Where is the Seine?"},
              {"role": "assistant", "content": "Paris is a city."}]
    ids1, ids2 = on.encode(first), on.encode(second)
    shared = next(i for i, (a, b) in enumerate(zip(ids1, ids2)) if a != b)
    assert shared > on.prefix_len(first, ids1) + 10  # the first paragraph, at least
    whole = SamplingParams(max_tokens=10, cache_prompt=True)
    assert on.prefix_len(first, ids1, whole=True) == len(ids1) - 1
    assert off.prefix_len(first, ids1, whole=True) == 0  # no cache, nothing to keep
    for conv in (first, second):
        _same((await on.generate([conv], whole))[0],
              (await off.generate([conv], SamplingParams(max_tokens=10)))[0])
    cache, stats = on._decoder.prefix_cache, on._decoder.stats
    # the first prompt computed once, all but its last token; the second only from where
    # it departs from the first
    assert stats.prefix_tokens == (len(ids1) - 1) + (len(ids2) - 1 - shared)
    assert cache.reused_tokens == shared and cache.partial_hits == 1
    # without cache_prompt the second step computes the first paragraph again
    again, _ = _pair(tiny)
    for conv in (first, second):
        await again.generate([conv], SamplingParams(max_tokens=10))
    assert again._decoder.stats.prefix_tokens > stats.prefix_tokens - (len(ids1) - 1) + 10


async def test_a_prompt_whose_prefix_is_computed_prefills_in_one_pass(tiny):
    # a miss computes the rest of the prompt, prefix and suffix, in one forward pass (before,
    # the prefix alone and then its last token in a second pass); a hit prefills its suffix
    # on the cached KV; a batch whose rows share a new prefix computes it once
    model, _ = tiny
    on, off = _pair(tiny, batch_wait_ms=20)
    passes = []
    hook = model.register_forward_hook(lambda m, args, kw, out: passes.append(
        kw["input_ids"].shape), with_kwargs=True)
    try:
        one = SamplingParams(max_tokens=1, cache_prompt=True)
        conv = [{"role": "user", "content": "Wikipedia Title: Paris\nParis is in France."},
                {"role": "assistant", "content": "Paris is a city"}]
        passes.clear()
        _same((await on.generate([conv], one))[0], (await off.generate([conv], one))[0])
        ids = on.encode(conv)
        assert passes[0] == (1, len(ids)) and len(passes) == 2  # on: one pass; off: one
        # the entry holds exactly the prefix's columns in every layer
        (key, kv), = on._decoder.prefix_cache._entries.items()
        assert len(key) == len(ids) - 1
        assert all(k.shape[2] == v.shape[2] == len(key) for k, v in kv)
        passes.clear()  # and decoding goes on from that one pass, token by token
        many = SamplingParams(max_tokens=12, cache_prompt=True)
        fresh_on, _ = _pair(tiny)
        got = (await fresh_on.generate([conv], many))[0]
        _same(got, (await off.generate([conv], SamplingParams(max_tokens=12)))[0])
        assert passes[0] == (1, len(ids))
        assert passes[1:len(got.token_ids)] == [(1, 1)] * (len(got.token_ids) - 1)
        longer = conv[:1] + [{"role": "assistant", "content": "Paris is a city in France"}]
        passes.clear()
        _same((await on.generate([longer], one))[0], (await off.generate([longer], one))[0])
        shared = on._decoder.prefix_cache.reused_tokens
        assert shared >= len(ids) - 4 and passes[0] == (1, len(on.encode(longer)) - shared)
        two = [ROLE_A + [{"role": "user", "content": q}] for q in QUESTIONS[:2]]
        on, off = _pair(tiny, batch_wait_ms=20)  # an empty cache
        passes.clear()
        out = await on.generate(two, SamplingParams(max_tokens=1))
        for got, conv2 in zip(out, two):
            _same(got, (await off.generate([conv2], SamplingParams(max_tokens=1)))[0])
        head = on.prefix_len(two[0], on.encode(two[0]))
        short, long_ = sorted(len(on.encode(c)) for c in two)  # the shorter prefills first
        # the first row whole, the other's suffix on the prefix the first one kept
        assert [tuple(p) for p in passes[:2]] == [(1, short), (1, long_ - head)], passes
    finally:
        hook.remove()


async def test_a_continued_trajectory_computes_only_its_new_turn(tiny):
    # Search-R1's turns (cache_prompt): one user turn, then the trajectory as an open
    # assistant turn that grows at its end
    from marag.roles import search_o1, search_r1

    on, off = _pair(tiny)
    assert search_r1.ROLE.cache_prompt and search_o1.ROLE.cache_prompt
    assert not search_o1.RID_ROLE.cache_prompt  # a one-off prompt
    q = "Who wrote Hamlet?"
    turn1 = "<think>I need the author.</think><search> Hamlet author </search>"
    info = "\n\n<information>Doc 1(Title: Hamlet) A play by Shakespeare.</information>\n\n"
    convs = [search_r1.build(q), search_r1.build(q, turn1 + info),
             search_r1.build(q, turn1 + info + "<think>It is Shakespeare.</think>")]
    p = SamplingParams(max_tokens=8, cache_prompt=True)
    for c in convs:
        _same((await on.generate([c], p))[0], (await off.generate([c], SamplingParams(max_tokens=8)))[0])
    cache, stats = on._decoder.prefix_cache, on._decoder.stats
    ids = [on.encode(c) for c in convs]
    # one entry per trajectory: each turn's key extends the last and replaces it
    assert len(cache) == 1
    # every prompt token computed about once (a token at each turn's boundary may be again)
    assert len(ids[2]) - 1 <= stats.prefix_tokens <= len(ids[2]) - 1 + 2 * 3


def _kv(n):
    import torch

    return [(torch.arange(n, dtype=torch.float32).view(1, 1, n, 1),) * 2]


def test_an_entry_its_conversation_moved_past_is_evicted_first():
    from marag.llm.hf_decode import PrefixCache

    head = tuple(range(20))  # the role's instruction, shared by every conversation
    a1, b1, c1 = (head + (100 + i,) * 30 for i in range(3))  # three first steps
    cache = PrefixCache(max_entries=3)
    for k in (a1, b1, c1):
        cache.put(k, _kv(len(k)))
    # the first steps share only the head with each other: nobody is moved
    assert list(cache._entries) == [a1, b1, c1]
    # a's second step: a paragraph inserted before a's question. The decoder starts it from
    # a1 (which makes a1 the most recent), then keeps it: a1 is stale and goes first, not
    # b1 or c1, whose conversations still need them
    a2 = head + (100,) * 10 + (7,) * 5 + (100,) * 20
    assert cache.longest(a2)[0] == 30
    cache.put(a2, _kv(len(a2)))
    assert list(cache._entries) == [b1, c1, a2]
    b2 = head + (101,) * 10 + (7,) * 5 + (101,) * 20
    cache.longest(b2)
    cache.put(b2, _kv(len(b2)))
    assert list(cache._entries) == [c1, a2, b2] and cache.evictions == 2


def test_no_entry_is_a_prefix_of_another():
    from marag.llm.hf_decode import PrefixCache

    cache = PrefixCache()
    head = tuple(range(20))
    cache.put(head, _kv(20))
    longer = head + (7, 8, 9)
    cache.put(longer, _kv(23))  # extends the first entry: replaces it
    assert len(cache) == 1 and cache.tokens == 23 and cache.get(head) is None
    n, kv = cache.longest(head)  # the first key is still served, cut from the longer entry
    assert n == 20 and kv[0][0].shape[2] == 20
    cache.put(head, kv)  # a key inside an entry is not stored twice
    assert len(cache) == 1 and cache.tokens == 23


def test_shared_refreshes_only_the_entry_a_prompt_will_start_from():
    from marag.llm.hf_decode import PrefixCache

    cache = PrefixCache(max_entries=2)
    old, new = tuple(range(20)) + (1,), tuple(range(20)) + (2,)
    cache.put(old, _kv(21))
    cache.put(new, _kv(21))
    # both share 20 tokens: the newest is the match; a caller that already has 20 (its own
    # leading turns) will not use it, so nothing moves
    assert cache.shared(tuple(range(20)) + (9, 9), above=20) == 20
    assert list(cache._entries) == [old, new]
    assert cache.shared(old + (5,), above=0) == 21  # the old entry, used: now the newest
    assert list(cache._entries) == [new, old]
    cache.put(tuple(range(30, 60)), _kv(30))  # a third entry evicts the least recent
    assert cache.get(old) is not None and cache.get(new) is None
    assert cache.shared((7,) * 10) == 0


def test_token_budget_evicts_the_least_recent():
    from marag.llm.hf_decode import PrefixCache

    cache = PrefixCache(max_entries=10, max_tokens=50)
    for first in (1, 2):
        cache.put((first,) * 20, _kv(20))
    assert cache.get((1,) * 20) is not None  # used last: (2,)*20 is now the least recent
    cache.put((3,) * 20, _kv(20))
    assert len(cache) == 2 and cache.tokens == 40
    assert cache.get((2,) * 20) is None and cache.get((1,) * 20) is not None
    cache.put((4,) * 60, _kv(60))  # over the whole budget: not stored, nothing evicted
    assert len(cache) == 2 and cache.tokens == 40 and cache.get((4,) * 60) is None
    with pytest.raises(ValueError):
        PrefixCache(max_tokens=0)


def test_conversations_continued_at_their_end_keep_one_entry_each():
    # 16 trajectories in flight, each prompt its previous one plus a new turn, in a cache of
    # 16 entries: an extended key replaces the one it extends, so each trajectory keeps one
    # entry and finds its whole previous prompt; were superseded keys kept, the cyclic
    # least-recently-used order would evict each one's latest prefix before its next turn
    from marag.llm.hf_decode import PrefixCache

    cache = PrefixCache(max_entries=16)
    keys = {q: tuple(range(50)) + (-q - 1,) for q in range(16)}
    for q, key in keys.items():
        cache.put(key, _kv(len(key)))
    for turn in range(1, 4):
        for q in range(16):
            grown = keys[q] + tuple(10_000 * (q + 1) + 10 * turn + i for i in range(10))
            n, _ = cache.longest(grown)
            assert n == len(keys[q])
            cache.put(grown, _kv(len(grown)))
            keys[q] = grown
    assert len(cache) == 16


def test_as_many_growing_conversations_as_the_old_entry_count_keep_their_prefixes():
    # IRCoT with 16 questions in flight: each step's prefix is the shared head, the
    # question's paragraphs so far and its question (new paragraphs go before the question,
    # so a step's key does not extend the last one's and both are kept); step after step,
    # every question must find its own previous paragraphs, not only the shared head: the
    # default entry count, above the questions in flight, is what keeps them
    from marag.llm.hf_decode import PrefixCache

    cache = PrefixCache()
    head = tuple(range(100))
    cache.put(head, _kv(100))
    found = []
    for step in range(1, 5):
        for q in range(16):
            paras = tuple(1000 + 100 * q + i for i in range(10 * step))
            key = head + paras + (-q - 1,)  # the question's own tokens come after
            n, _ = cache.longest(key)
            found.append((step, n))
            cache.put(key, _kv(len(key)))
    later = [n for step, n in found if step > 1]
    assert min(later) >= 100 + 10  # always its own last paragraphs, beyond the head
