"""A batched decoding loop over a transformers causal LM with a shared KV cache.

Why not ``model.generate``: every row here carries its own sampling parameters (temperature,
top-p, max tokens, stop strings, allowed tokens, seed), so requests from different callers
share one forward pass without being grouped by parameters; rows that finish (EOS, stop
string, length) leave the batch at once and are answered immediately, and new rows join the
running batch between steps (continuous batching: their prompts are prefilled separately and
their KV cache is left-padded into the running one), so a short answer never waits for the
longest one and the batch stays full; the logprob of each chosen token comes from the same
pass.

Logprobs: for a greedy row (temperature 0) they are ``log_softmax(logits)``; for a sampled
row ``log_softmax(logits / temperature)``, i.e. under the sampling temperature and before the
top-p cut, which is what a PPO trainer recomputes. ``allowed_text`` masks the logits first,
so logprobs are then renormalised over the allowed tokens.

Sampling draws from a per-row ``torch.Generator`` seeded from the request's seed, so a seeded
request samples the same tokens whether it runs alone or inside a batch.
"""

from __future__ import annotations

import heapq
import logging
import random
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch

from marag.llm.base import PromptError, SamplingParams, first_stop
from marag.llm.cache_kwarg import cache_kwarg
from marag.llm.chat import MIN_PREFIX, eos_ids
from marag.llm.cpu_linear import use_fast_linears
from marag.llm.cudnn_attention import without_cudnn_attention

log = logging.getLogger(__name__)


@dataclass
class Row:
    prompt_ids: list[int]
    params: SamplingParams
    allowed: torch.Tensor | None = None  # bool mask over the vocabulary
    token_ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    text: str | None = None  # set when a stop string cut the output
    finish_reason: str = ""
    generator: torch.Generator | None = None
    started: float = 0.0  # when its prefill began
    first_token_at: float = 0.0  # when its first token was chosen (prefill done)
    tag: Any = None  # the caller's handle for this row (the backend's request)
    # leading prompt tokens whose KV may come from the shared-prefix cache (0: none)
    prefix_len: int = 0
    # called (in the decoding thread) after every token the row takes, so a caller can stream
    on_token: Callable[[Row], None] | None = None
    top_logprobs: int = 0  # keep this many most likely (token, logprob) pairs per step
    tops: list[list[tuple[int, float]]] = field(default_factory=list)
    stop_when_off: bool = False  # its params.stop_when raised: no longer asked


@dataclass
class DecodeStats:
    """Where the decoder's time went (cumulative; read by benchmarks/e2e_profile.py).

    A handful of ``perf_counter`` calls per forward pass, so always on. Prefill token counts
    say how much of the work was real: ``prefill_tokens`` are prompt tokens fed (prefix-cache
    hits excluded), ``prefill_padded`` the cells of the padded input, ``prefix_tokens`` the
    prefix tokens computed on cache misses (in ``prefix_s``). A row whose prefix is computed
    prefills with it in one pass, whose time is split between ``prefix_s`` and ``prefill_s``
    by their token counts.
    """

    prefills: int = 0
    prefill_s: float = 0.0
    prefill_tokens: int = 0
    prefill_padded: int = 0
    prefix_s: float = 0.0
    prefix_tokens: int = 0
    steps: int = 0  # decode forward passes (one new token for every running row)
    step_s: float = 0.0
    step_rows: int = 0  # rows summed over decode passes (the mean batch is step_rows / steps)
    choose_s: float = 0.0  # picking tokens, stop strings, delivering
    merge_s: float = 0.0  # joining new rows' caches into the running batch

    def as_dict(self) -> dict[str, float]:
        from dataclasses import asdict

        return asdict(self)


@dataclass
class DecodeResult:
    text: str
    finish_reason: str
    token_ids: list[int]
    logprobs: list[float]
    seconds: float


def _left_pad(rows: list[Row], pad_id: int,
              multiple: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    """Rows left-padded to the longest, rounded up to ``multiple`` columns."""
    width = max(len(r.prompt_ids) for r in rows)
    width = -(-width // multiple) * multiple
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, r in enumerate(rows):
        n = len(r.prompt_ids)
        ids[i, width - n:] = torch.tensor(r.prompt_ids, dtype=torch.long)
        mask[i, width - n:] = 1
    return ids, mask


def _length_groups(rows: list[Row], slack: float = 1.3) -> list[list[Row]]:
    """Split rows into prefill groups of similar prompt length.

    Left padding makes a prefill cost rows x longest prompt; grouping by length keeps the
    padded work within ``slack`` of the real work (the groups' caches are merged afterwards).
    """
    groups: list[list[Row]] = []
    real = 0
    # the work of a prefill is the part of the prompt not served by the prefix cache
    for r in sorted(rows, key=lambda r: len(r.prompt_ids) - r.prefix_len):
        n = len(r.prompt_ids) - r.prefix_len
        if groups and (len(groups[-1]) + 1) * n <= slack * (real + n):
            groups[-1].append(r)
            real += n
        else:
            groups.append([r])
            real = n
    return groups


def _top_p_filter(probs: torch.Tensor, top_p: float) -> torch.Tensor:
    sorted_p, order = torch.sort(probs, descending=True)
    cum = torch.cumsum(sorted_p, dim=-1)
    # keep the smallest prefix whose mass reaches top_p (always at least the best token)
    drop = cum - sorted_p >= top_p
    sorted_p[drop] = 0.0
    out = torch.zeros_like(probs)
    out[order] = sorted_p
    return out / out.sum()


def _sample(probs: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
    """The exponential race: row i takes ``argmax(probs[i] / noise[i])`` where ``noise`` holds
    independent Exp(1) draws, which picks token k with probability ``probs[i, k] / sum``
    (``probs`` need not be normalised; zero mass is never picked).

    Unlike inverse-CDF sampling over the vocabulary, the choice only changes if two tokens
    nearly tie, so the last-bit differences between a row's logits alone and inside a batch
    do not change its sample. Inverse CDF does not have that property: logit noise of 1e-5
    moves all 49k cdf boundaries and changed 0.85% of its draws (34 of 4,000, measured),
    which flipped 2 of 8 seeded 128-token answers between batched and alone.
    """
    return torch.argmax(probs / noise, dim=-1)


def _without_end(rows: list[Row], logp: torch.Tensor, eos_ids: list[int]) -> torch.Tensor:
    """``logp`` with end of text taken out (and the rest renormalised) in the rows that have
    fewer than ``min_tokens`` tokens; ``logp`` itself when no row needs it."""
    ban = [i for i, r in enumerate(rows) if eos_ids and len(r.token_ids) < r.params.min_tokens]
    if not ban:
        return logp
    draw = logp.clone()
    for i in ban:
        row = draw[i].clone()
        row[eos_ids] = float("-inf")
        if torch.isfinite(row).any():  # an allowed set of end of text alone still ends
            draw[i] = torch.log_softmax(row, dim=-1)
    return draw


def _choose(rows: list[Row], logits: torch.Tensor,
            eos_ids: Iterable[int] = ()) -> tuple[list[int], list[float]]:
    """Pick the next token for every row of ``logits`` [rows, vocab] (fp32).

    A row with fewer than ``params.min_tokens`` tokens draws without ``eos_ids`` (unless
    they are all it may write); the logprobs it reports stay the model's own, with end of
    text in the distribution (as vLLM reports them, and as a trainer recomputes them: no
    logprob gap appears). ``allowed`` instead renormalises the logprobs, as the trainer
    recomputes them under the same mask.

    Runs on the logits' device (on a GPU the 49k-wide softmax and noise of 64 rows would cost
    more on the host than the forward pass). A sampled row draws its noise from its own
    generator, so its choice does not depend on the other rows of the batch.
    """
    device = logits.device
    for i, r in enumerate(rows):
        if r.allowed is not None:
            logits[i].masked_fill_(~r.allowed.to(device), float("-inf"))
    temps = torch.tensor([r.params.temperature if r.params.temperature > 0 else 1.0
                          for r in rows], dtype=logits.dtype, device=device)
    logp = torch.log_softmax(logits / temps[:, None], dim=-1)
    draw = _without_end(rows, logp, sorted(set(eos_ids)))
    chosen_ids = torch.argmax(draw, dim=-1)
    sampled = [i for i, r in enumerate(rows) if r.params.temperature > 0]
    if sampled:
        index = torch.tensor(sampled, dtype=torch.long, device=device)
        probs = draw[index].exp()
        for j, i in enumerate(sampled):
            if rows[i].params.top_p < 1.0:
                probs[j] = _top_p_filter(probs[j], rows[i].params.top_p)
        # Exp(1) noise as -log(U), ~3x faster on CPU than ``Tensor.exponential_``. U is
        # float64: float32's 2^-24 steps below 1 would floor the noise at 6e-8, so a token
        # less likely than ~1e-7 x the top one could never be drawn.
        noise = torch.stack([torch.rand(probs.shape[1], generator=rows[i].generator,
                                        dtype=torch.float64, device=device) for i in sampled])
        chosen_ids[index] = _sample(probs, noise.log_().neg_())
    chosen = logp[torch.arange(len(rows), device=device), chosen_ids]
    wants = [i for i, r in enumerate(rows) if r.top_logprobs > 0]
    if wants:  # the alternatives, from the same distribution as the chosen token's logprob
        n = min(max(rows[i].top_logprobs for i in wants), logp.shape[1])
        values, ids = torch.topk(logp[torch.tensor(wants, device=device)], n, dim=-1)
        for j, i in enumerate(wants):
            k = rows[i].top_logprobs
            rows[i].tops.append(list(zip(ids[j, :k].tolist(), values[j, :k].tolist())))
    return chosen_ids.tolist(), chosen.tolist()


class PrefixCache:
    """KV of recently seen prompt prefixes (token ids -> per-layer keys/values of one row).

    Least-recently-used entries are dropped beyond ``max_entries`` entries or ``max_tokens``
    cached tokens in all, so memory stays bounded (``evictions`` counts them).
    ``hits``/``misses`` count lookups and ``reused_tokens`` the prompt tokens whose prefill a
    hit saved. A miss may still start from the longest common prefix it shares with an entry
    (``longest``, counted in ``partial_hits``): a role whose prompt grows by appending
    (IRCoT's paragraphs, a continued trajectory) then computes only what is new.

    No entry is a prefix of another: a key that extends entries replaces them (the longer
    KV holds theirs, and ``longest`` cuts it back), and a key inside an entry is not stored.
    A conversation continued turn by turn (a trajectory that grows at its end) so keeps one
    entry, not one superseded entry per turn. A prompt that grows in its middle (IRCoT puts
    new paragraphs before its question) extends no entry and keeps its old ones; for it the
    entry count matters: with fewer entries than conversations in flight, the least-recently-
    used rule evicts each one's latest prefix just before its next step (a cyclic access
    pattern), so a grown prompt finds only the shared system prefix. A key longer than
    ``max_tokens`` is not stored.
    """

    def __init__(self, max_entries: int = 64, max_tokens: int = 65536) -> None:
        if max_entries < 1 or max_tokens < 1:
            raise ValueError(f"PrefixCache needs max_entries >= 1 and max_tokens >= 1, "
                             f"got {max_entries}, {max_tokens}")
        self.max_entries = max_entries
        self.max_tokens = max_tokens
        self._entries: OrderedDict[tuple[int, ...], list[tuple[torch.Tensor, torch.Tensor]]]
        self._entries = OrderedDict()
        self.tokens = 0  # cached tokens, all entries together
        self.hits = 0
        self.misses = 0
        self.partial_hits = 0
        self.reused_tokens = 0
        self.evictions = 0  # entries dropped for room (not those a longer key replaced)

    def get(self, key: tuple[int, ...]) -> list[tuple[torch.Tensor, torch.Tensor]] | None:
        kv = self._entries.get(key)
        if kv is not None:
            self._entries.move_to_end(key)
            self.hits += 1
            self.reused_tokens += len(key)
        return kv

    def longest(self, key: tuple[int, ...], min_len: int = MIN_PREFIX
                ) -> tuple[int, list[tuple[torch.Tensor, torch.Tensor]] | None]:
        """The longest run of leading tokens ``key`` shares with an entry (at least
        ``min_len``) and that entry's KV cut to it; ``(0, None)`` when none is that long."""
        best, best_key = self._match(key)
        if best_key is None or best < min_len:
            return 0, None
        self._entries.move_to_end(best_key)
        self.partial_hits += 1
        self.reused_tokens += best
        return best, [(k[:, :, :best], v[:, :, :best]) for k, v in self._entries[best_key]]

    def shared(self, ids: tuple[int, ...], above: int = 0) -> int:
        """How many leading tokens of ``ids`` some entry holds: a prompt may share more with
        an entry than its own leading turns (IRCoT's direct reader repeats a reasoning step's
        paragraphs and question). No statistics. When that is more than ``above`` and at
        least MIN_PREFIX tokens (the caller will start from it), the entry becomes the most
        recently used, the newest of equally long matches (so a row's own latest prefix, not
        an old entry that shares only the system prompt, stays fresh)."""
        best, best_key = self._match(ids)
        if best_key is not None and best > above and best >= MIN_PREFIX:
            self._entries.move_to_end(best_key)
        return best

    def _match(self, ids: tuple[int, ...]) -> tuple[int, tuple[int, ...] | None]:
        """The entry sharing the most leading tokens with ``ids`` and how many; the newest of
        equally long matches."""
        best, best_key = 0, None
        for k in reversed(self._entries):
            n = _common_prefix(k, ids)
            if n > best:
                best, best_key = n, k
        return best, best_key

    def put(self, key: tuple[int, ...], kv: list[tuple[torch.Tensor, torch.Tensor]]) -> None:
        """Keep ``kv`` under ``key``, unless an entry already holds it (``key`` is a prefix
        of that entry's); entries whose keys are prefixes of ``key`` are dropped.

        An entry that shares more of ``key`` than any other entry does, and at least
        MIN_PREFIX tokens, without being a prefix of it (``key`` is the same conversation's
        prompt grown in its middle: IRCoT's paragraphs go before its question) is stale: it
        goes to the front of the eviction order, so with many conversations in flight each
        one's latest entry outlives the one it replaced. (A head that several entries share,
        such as a role's instruction, is not anyone's own: nothing is moved for it; nor when
        there is only one other entry, whose owner cannot be told.)"""
        self.misses += 1
        n = len(key)
        if n > self.max_tokens or any(len(k) >= n and k[:n] == key for k in self._entries):
            return
        for k in [k for k in self._entries if len(k) < n and key[:len(k)] == k]:
            self._drop(k)
        shares = heapq.nlargest(2, ((_common_prefix(k, key), k) for k in self._entries),
                                key=lambda x: x[0])
        if len(shares) > 1 and shares[0][0] >= MIN_PREFIX and shares[1][0] < shares[0][0]:
            self._entries.move_to_end(shares[0][1], last=False)
        self._entries[key] = kv
        self.tokens += n
        while len(self._entries) > 1 and (len(self._entries) > self.max_entries
                                          or self.tokens > self.max_tokens):
            self._drop(next(iter(self._entries)))
            self.evictions += 1

    def _drop(self, key: tuple[int, ...]) -> None:
        del self._entries[key]
        self.tokens -= len(key)

    def __len__(self) -> int:
        return len(self._entries)

    def clear(self) -> None:
        """Drop every entry (the model's weights changed, so the cached KV is stale)."""
        self._entries.clear()
        self.tokens = 0


def _common_prefix(a: tuple[int, ...], b: tuple[int, ...]) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


PAD_MULTIPLE = 32


class BatchDecoder:
    """Decodes rows with a shared KV cache. Not thread-safe: callers serialise ``run``."""

    def __init__(self, model: Any, tokenizer: Any, *, bf16_autocast: bool = False,
                 prefix_cache: bool = False, prefix_entries: int = 64,
                 prefix_tokens: int = 65536,
                 static_len: int = 0, cuda_graphs: bool = True) -> None:
        self.model = model
        self._cache_kw = cache_kwarg(model)  # "cache", or "past_key_values" before 5.x
        self.tokenizer = tokenizer
        self.bf16_autocast = bf16_autocast
        eos = eos_ids(model, tokenizer)
        self.eos_ids = eos
        pad = tokenizer.pad_token_id
        self.pad_id = int(pad if pad is not None else min(eos) if eos else 0)
        self.max_positions = int(getattr(model.config, "max_position_embeddings", 0) or 0)
        embed = model.get_input_embeddings() if hasattr(model, "get_input_embeddings") else None
        self.vocab_size = int(getattr(embed, "num_embeddings", 0)
                              or getattr(model.config, "vocab_size", 0) or 0)
        if model.device.type == "cpu":  # few-row products take a faster CPU kernel
            use_fast_linears(model)
        self._rng = random.Random()
        self.stats = DecodeStats()
        self.prefills = 0
        self.steps = 0  # token-choosing steps taken (each picks one token for every row)
        self.dropped = 0
        # set by the owner: True when a row's caller has gone (cancelled), so it stops early
        self.abandoned: Callable[[Row], bool] | None = None
        # Rows can join a running batch only when every cache layer is a plain growing
        # key/value store; sliding-window layers (Gemma 3) keep a ring of recent tokens that a
        # left-padded merge would corrupt, so such models decode batch by batch.
        from transformers import DynamicCache

        probe = DynamicCache(config=model.config)
        self.can_join = all(type(layer).__name__ == "DynamicLayer" for layer in probe.layers)
        # Reusing a prefix's KV needs the same plain growing layers (a sliding-window ring
        # cannot be pre-filled with padded prefixes), so it is off wherever joining is.
        self.prefix_cache = (PrefixCache(prefix_entries, prefix_tokens)
                             if prefix_cache and self.can_join else None)
        # bf16/fp16 matmuls on CPU (oneDNN) compile a kernel for every new input shape, about
        # a second each on the 2-core box: prefill widths rounded up to a multiple of
        # PAD_MULTIPLE repeat, so a run compiles a few dozen kernels instead of one per prompt
        # length (benchmarks/e2e_profile.py). fp32 and GPU kernels are not shape-compiled.
        low = getattr(model, "dtype", torch.float32) in (torch.bfloat16, torch.float16)
        self.pad_multiple = PAD_MULTIPLE if low and model.device.type == "cpu" else 1
        # Fixed-slot decoding (marag.llm.hf_static): rows that fit in ``static_len`` columns
        # decode in a cache allocated once, their step a CUDA graph on CUDA. 0: off.
        from marag.llm.hf_static import static_supported

        why = static_supported(model) if static_len else None
        if why is None and static_len and not self.can_join:
            why = "its cache layers cannot take joined rows"
        if why is not None:
            raise PromptError(f"fixed-slot decoding (static_cache) is not available for this "
                              f"model: {why}")
        self.static_len = min(static_len, self.max_positions or static_len)
        self.cuda_graphs = cuda_graphs
        self.slot_step: Any = None  # a SlotStep, built at the first run that uses it
        self._seated: dict[int, Row] = {}  # slot -> the row decoding in it

    def check(self, prompt_ids: list[int]) -> str | None:
        """Why this prompt cannot be decoded (None: it can). Checked per row, before batching."""
        if not prompt_ids:
            return "the prompt is empty (it encodes to no tokens)"
        if self.max_positions and len(prompt_ids) >= self.max_positions:
            return (f"the prompt has {len(prompt_ids)} tokens; this model accepts at most "
                    f"{self.max_positions - 1}")
        if self.vocab_size:
            bad = [t for t in prompt_ids if not 0 <= t < self.vocab_size]
            if bad:
                return (f"token id {bad[0]} is outside this model's vocabulary "
                        f"(0..{self.vocab_size - 1})")
        return None

    def _prefill_alone(self, group: list[Row], fail: Callable[[Row, Exception], None] | None
                       ) -> list[_Batch]:
        """Prefill ``group`` together; if that fails, each row not prefilled yet alone, so
        that only a row whose own prefill fails is dropped (through ``fail``) and the others
        decode as they would."""
        done: list[_Batch] = []
        try:
            for fresh in self._prefill(group):  # kept one by one: a later row may raise
                done.append(fresh)  # noqa: PERF402
            return done
        except Exception as e:  # re-raised when nobody can be told
            if fail is None:
                raise
            ready = {id(r) for fresh in done for r in fresh.rows}
            left = [r for r in group if id(r) not in ready]
            if len(left) == 1:
                fail(left[0], PromptError(f"decoding this prompt failed: "
                                          f"{type(e).__name__}: {e}"))
                return done
        for r in left:
            done.extend(self._prefill_alone([r], fail))
        return done

    def _forward(self, ids: torch.Tensor, mask: torch.Tensor, pos: torch.Tensor,
                 cache: Any) -> torch.Tensor:
        device = self.model.device
        inputs = {"input_ids": ids.to(device), "attention_mask": mask.to(device),
                  "position_ids": pos.to(device), self._cache_kw: cache, "use_cache": True}
        autocast = self.bf16_autocast and device.type == "cpu"
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast), \
                without_cudnn_attention(device):
            out = self.model(**inputs, logits_to_keep=1)
        return out.logits[:, -1, :].float()

    def _finish(self, row: Row, token: int, logprob: float) -> bool:
        row.token_ids.append(token)
        row.logprobs.append(logprob)
        if not row.first_token_at:
            row.first_token_at = time.perf_counter()
        p = row.params
        if token in self.eos_ids:
            row.finish_reason = "stop"
        elif (p.stop or p.stop_when) and len(row.token_ids) >= p.min_tokens:
            text = self.tokenizer.decode(row.token_ids, skip_special_tokens=True)
            # as vLLM: a stop string written within the first min_tokens tokens does not count
            start = (len(self.tokenizer.decode(row.token_ids[:p.min_tokens],
                                               skip_special_tokens=True)) if p.min_tokens else 0)
            cut = first_stop(text, p.stop, start) if p.stop else -1
            if cut >= 0:
                row.text = text[:cut]
                row.finish_reason = "stop"
            elif p.stop_when is not None and not row.stop_when_off and self._settled(row, text):
                row.finish_reason = "stop"  # the caller has what it reads; the text stays whole
        if not row.finish_reason and len(row.token_ids) >= p.max_tokens:
            row.finish_reason = "length"
        if (not row.finish_reason and self.max_positions
                and len(row.prompt_ids) + len(row.token_ids) >= self.max_positions):
            row.finish_reason = "length"
        return bool(row.finish_reason)

    @staticmethod
    def _settled(row: Row, text: str) -> bool:
        """``row.params.stop_when(text)``, never while the text ends in a character whose
        bytes are not all decoded yet (U+FFFD: its next token may complete it). A predicate
        that raises is switched off for the row, which then decodes as other backends do
        (to a stop string or max_tokens), and the error is logged."""
        if text.endswith("\ufffd"):
            return False
        assert row.params.stop_when is not None
        try:
            return bool(row.params.stop_when(text))
        except Exception as e:  # noqa: BLE001 - a caller's predicate; only an optimisation
            row.stop_when_off = True
            log.warning("stop_when %r raised %s: %s; this reply decodes to its stop strings",
                        row.params.stop_when, type(e).__name__, e)
            return False

    def _prefill(self, rows: list[Row]) -> Iterator[_Batch]:
        """Prefill ``rows``: one batch of them, or one per row whose prompt head must be
        computed for the prefix cache (``_prefill_whole``) and one of the rest, each yielded
        as soon as it is computed."""
        for r in rows:
            if r.params.temperature > 0:
                seed = r.params.seed if r.params.seed is not None else self._rng.getrandbits(63)
                r.generator = torch.Generator(self.model.device).manual_seed(int(seed))
        if self.prefix_cache is not None and any(r.prefix_len for r in rows):
            rest, kvs = [], []
            for r in rows:  # in turn: a prefix one row computes, the next finds in the cache
                start, kv = self._cached_prefix(r) if r.prefix_len else (0, None)
                if r.prefix_len and start < r.prefix_len:
                    yield self._prefill_whole(r, start, kv)
                else:
                    rest.append(r)
                    kvs.append(kv)
            if any(kv is not None for kv in kvs):
                yield self._prefill_with_prefixes(rest, kvs)
            elif rest:
                yield self._prefill_plain(rest)
            return
        yield self._prefill_plain(rows)

    def _prefill_plain(self, rows: list[Row]) -> _Batch:
        """Prefill ``rows`` whole, left-padded into one batch."""
        from marag.llm.kv_layer import roomy_cache

        ids, mask = _left_pad(rows, self.pad_id, self.pad_multiple)
        pos = (mask.cumsum(-1) - 1).clamp(min=0)
        cache = roomy_cache(self.model.config)
        t0 = time.perf_counter()
        logits = self._forward(ids, mask, pos, cache)
        self._count_prefill(time.perf_counter() - t0, int(mask.sum()), ids.numel())
        return _Batch(rows, cache, mask, pos[:, -1], logits)

    def _count_prefill(self, seconds: float, tokens: int, padded: int) -> None:
        """One prefill pass: ``tokens`` real prompt tokens in ``padded`` input cells."""
        st = self.stats
        st.prefill_s += seconds
        st.prefills += 1
        st.prefill_tokens += tokens
        st.prefill_padded += padded
        self.prefills += 1

    def _cached_prefix(self, r: Row) -> tuple[int, list[tuple[torch.Tensor, torch.Tensor]] | None]:
        """How many leading tokens of ``r``'s prefix the prefix cache holds and their KV: the
        whole prefix (an entry under its key, or inside a longer entry), the longest part an
        entry shares with it, or ``(0, None)``."""
        assert self.prefix_cache is not None
        key = tuple(r.prompt_ids[: r.prefix_len])
        kv = self.prefix_cache.get(key)
        if kv is not None:
            return len(key), kv
        return self.prefix_cache.longest(key)

    def _prefill_whole(self, r: Row, start: int,
                       base: list[tuple[torch.Tensor, torch.Tensor]] | None) -> _Batch:
        """Prefill one row whose prefix the cache holds only its first ``start`` tokens of
        (KV ``base``): the rest of its prompt in one unpadded forward pass, alone, and its
        prefix's KV kept in the cache. (Computing the prefix alone and then the suffix in a
        batch took a second pass for what is often one token: IRCoT's steps and Search-R1's
        turns cache all but their last token.)"""
        from marag.llm.kv_layer import roomy_cache

        assert self.prefix_cache is not None
        n, p = len(r.prompt_ids), r.prefix_len
        cache = roomy_cache(self.model.config)
        for layer_idx, (k, v) in enumerate(base or ()):
            cache.update(k, v, layer_idx)
        ids = torch.tensor([r.prompt_ids[start:]], dtype=torch.long)
        mask = torch.ones((1, n), dtype=torch.long)
        pos = torch.arange(start, n)[None, :]
        t0 = time.perf_counter()
        logits = self._forward(ids, mask, pos, cache)
        seconds = time.perf_counter() - t0
        # the pass's time split between the prefix and the rest by their token counts
        self.stats.prefix_s += seconds * (p - start) / (n - start)
        self.stats.prefix_tokens += p - start
        self._count_prefill(seconds * (n - p) / (n - start), n - p, n - p)

        def head(t: torch.Tensor) -> torch.Tensor:
            # views of the row's cache when the prefix is nearly all of it (decoding writes
            # into a new buffer, never into these columns); a copy otherwise, so that a kept
            # prefix does not hold on to a long suffix's memory
            return t[:, :, :p] if n - p == 1 else t[:, :, :p].clone()

        kv = [(head(layer.keys), head(layer.values)) for layer in cache.layers]
        self.prefix_cache.put(tuple(r.prompt_ids[:p]), kv)
        return _Batch([r], cache, mask, pos[:, -1], logits)

    def _prefill_with_prefixes(self, rows: list[Row],
                               kvs: list[list[tuple[torch.Tensor, torch.Tensor]] | None]
                               ) -> _Batch:
        """Prefill only the suffixes, on top of the rows' cached prefix KVs (``kvs``: each
        row's whole prefix, None for a row without one).

        Cache columns: ``[left pad | prefix | left pad | suffix]`` per row, the prefixes
        right-aligned at column P (the longest prefix) and the suffixes left-padded after it.
        The attention mask hides both pads and each suffix token gets the position id it has
        in the full prompt, so every real token sees exactly what an unpadded prefill shows it.
        """
        from marag.llm.kv_layer import roomy_cache

        width_p = max(r.prefix_len for r in rows)
        suffixes = [Row(r.prompt_ids[r.prefix_len:], r.params) for r in rows]
        ids, sfx_mask = _left_pad(suffixes, self.pad_id, self.pad_multiple)
        pre_mask = torch.zeros((len(rows), width_p), dtype=torch.long)
        for i, r in enumerate(rows):
            if r.prefix_len:
                pre_mask[i, width_p - r.prefix_len:] = 1
        offsets = torch.tensor([r.prefix_len for r in rows], dtype=torch.long)
        pos = (sfx_mask.cumsum(-1) - 1).clamp(min=0) + offsets[:, None]
        mask = torch.cat([pre_mask, sfx_mask], dim=1)
        cache = roomy_cache(self.model.config)
        some = next(kv for kv in kvs if kv is not None)
        for layer_idx, (k0, v0) in enumerate(some):
            keys = k0.new_zeros((len(rows), k0.shape[1], width_p, k0.shape[3]))
            values = v0.new_zeros((len(rows), v0.shape[1], width_p, v0.shape[3]))
            for i, kv in enumerate(kvs):
                if kv is not None:
                    n = rows[i].prefix_len
                    keys[i, :, width_p - n:] = kv[layer_idx][0][0]
                    values[i, :, width_p - n:] = kv[layer_idx][1][0]
            cache.update(keys, values, layer_idx)
        t0 = time.perf_counter()
        logits = self._forward(ids, mask, pos, cache)
        self._count_prefill(time.perf_counter() - t0, int(sfx_mask.sum()), ids.numel())
        return _Batch(rows, cache, mask, pos[:, -1], logits)

    def _advance(self, batch: _Batch, deliver: Callable[[Row, DecodeResult], None]) -> None:
        """Choose every row's next token from ``batch.logits``; deliver and drop finished rows."""
        t0 = time.perf_counter()
        tokens, lps = _choose(batch.rows, batch.logits, self.eos_ids)
        self.steps += 1
        keep = self._take(batch.rows, tokens, lps, deliver)
        if len(keep) < len(batch.rows):
            batch.select(keep)
        batch.next_tokens = [tokens[s] for s in keep]
        self.stats.choose_s += time.perf_counter() - t0

    def _take(self, rows: list[Row], tokens: list[int], lps: list[float],
              deliver: Callable[[Row, DecodeResult], None]) -> list[int]:
        """Give every row its chosen token; deliver finished rows and drop abandoned ones.
        Returns the indices of the rows that go on."""
        keep = []
        for i, r in enumerate(rows):
            finished = self._finish(r, tokens[i], lps[i])
            if r.on_token is not None:
                r.on_token(r)
            if finished:
                deliver(r, self._result(r))
            elif self.abandoned is not None and self.abandoned(r):
                self.dropped += 1  # nobody waits for this row any more
            else:
                keep.append(i)
        return keep

    # ------------------------------------------------------------ fixed-slot decoding

    def _fits(self, r: Row) -> bool:
        return len(r.prompt_ids) + r.params.max_tokens <= self.static_len

    def _seat(self, fresh: _Batch, max_rows: int) -> _Batch:
        """Move the rows of a just-prefilled batch that fit into free slots; returns the
        batch of those that did not (they decode in the growing cache)."""
        from marag.llm.hf_static import SlotStep

        step = self.slot_step
        autocast = self.bf16_autocast and self.model.device.type == "cpu"
        if step is None or step.slots < max_rows or step.cpu_autocast != autocast:
            if self._seated:  # never rebuild under running rows: decode the rest as they are
                return fresh
            # the cache's dtypes follow the autocast setting, so a change builds new slots
            step = self.slot_step = SlotStep(self.model, max_rows, self.static_len,
                                             graphs=self.cuda_graphs, cpu_autocast=autocast)
        free = [s for s in range(step.slots) if s not in self._seated]
        stay = []
        for i, r in enumerate(fresh.rows):
            if not self._fits(r) or not free:
                stay.append(i)
                continue
            slot = free.pop(0)
            columns = fresh.mask[i].nonzero()[:, 0]
            step.place(slot, [layer.keys[i] for layer in fresh.cache.layers],
                       [layer.values[i] for layer in fresh.cache.layers],
                       columns, fresh.next_tokens[i])
            self._seated[slot] = r
        if len(stay) < len(fresh.rows):
            fresh.select(stay)
            fresh.next_tokens = [fresh.next_tokens[i] for i in stay]
        return fresh

    def _step_slots(self, deliver: Callable[[Row, DecodeResult], None],
                    count: bool = True) -> None:
        """One decoding step of every seated row (one graph replay on CUDA); ``count``: it is
        the loop's only step (else the growing batch's step counts it)."""
        step = self.slot_step
        slots = sorted(self._seated)
        rows = [self._seated[s] for s in slots]
        t0 = time.perf_counter()
        logits = step.step()
        index = torch.tensor(slots, dtype=torch.long, device=logits.device)
        picked = logits.index_select(0, index)
        self.stats.step_s += time.perf_counter() - t0
        self.stats.steps += 1
        self.stats.step_rows += len(rows)
        t0 = time.perf_counter()
        tokens, lps = _choose(rows, picked, self.eos_ids)
        self.steps += count
        keep = set(self._take(rows, tokens, lps, deliver))
        for i, slot in enumerate(slots):
            if i in keep:
                step.next_ids[slot] = tokens[i]
                step.next_pos[slot] += 1
            else:
                del self._seated[slot]
                step.free(slot)
        self.stats.choose_s += time.perf_counter() - t0

    def drop_graphs(self) -> None:
        """Forget captured decode steps (call when the model's weights were replaced)."""
        if self.slot_step is not None:
            self.slot_step.drop_graph()

    def _result(self, r: Row) -> DecodeResult:
        text = r.text
        if text is None:
            text = self.tokenizer.decode(r.token_ids, skip_special_tokens=True)
        return DecodeResult(text, r.finish_reason, r.token_ids, r.logprobs,
                            time.perf_counter() - r.started)

    def run(self, admit: Callable[[int], list[Row]],
            deliver: Callable[[Row, DecodeResult], None], max_rows: int,
            fail: Callable[[Row, Exception], None] | None = None) -> None:
        """Decode until no row is left and ``admit`` has nothing more.

        ``admit(n)`` hands over up to ``n`` new rows; it is asked between decoding steps
        whenever the batch has room, so a new request joins the running batch (continuous
        batching) instead of waiting for the longest row to finish. ``deliver`` is called as
        soon as a row finishes. With ``fail``, a row that cannot be decoded (``check``, or its
        own prefill raising) is handed to ``fail`` with a ``PromptError`` and the other rows go
        on as if it had never been sent; without it, such an error propagates.
        """
        try:
            self._run(admit, deliver, max_rows, fail)
        except BaseException:
            # the seated rows belong to this run's callers, who get its error: free their
            # slots, so that the next run does not decode them again
            if self._seated:  # a fresh set of slots next time (the old ones may be broken too)
                self._seated.clear()
                self.slot_step = None
            raise

    def _run(self, admit: Callable[[int], list[Row]],
             deliver: Callable[[Row, DecodeResult], None], max_rows: int,
             fail: Callable[[Row, Exception], None] | None) -> None:
        running: _Batch | None = None
        with torch.inference_mode():
            while True:
                room = max_rows - (len(running.rows) if running else 0) - len(self._seated)
                idle = running is None and not self._seated
                new = admit(room) if room > 0 and (idle or self.can_join) else []
                if fail is not None:
                    good = []
                    for r in new:
                        why = self.check(r.prompt_ids)
                        if why is None:
                            good.append(r)
                        else:
                            fail(r, PromptError(why))
                    if len(good) < len(new) and not good:
                        continue  # every new row was refused; ask again
                    new = good
                for r in new:  # a prefix must leave at least one token to prefill
                    if self.prefix_cache is None or r.prefix_len >= len(r.prompt_ids):
                        r.prefix_len = 0
                    else:  # start from whatever part of the prompt an entry already holds
                        held = self.prefix_cache.shared(tuple(r.prompt_ids[:-1]), r.prefix_len)
                        if held >= MIN_PREFIX and held > r.prefix_len:
                            r.prefix_len = held
                # sliding-window caches cannot be merged, so such models prefill in one go
                joined: _Batch | None = None  # this round's new rows, joined among themselves
                for group in _length_groups(new) if self.can_join else [new] if new else []:
                    for r in group:
                        r.started = time.perf_counter()
                    for fresh in self._prefill_alone(group, fail):
                        self._advance(fresh, deliver)
                        if fresh.rows and joined is not None and not self.can_join:
                            # a batch-by-batch model whose group was split: finish this part
                            # before the next (their caches cannot be merged)
                            self._finish_batch(fresh, deliver)
                        elif fresh.rows:
                            t0 = time.perf_counter()
                            if self.static_len:
                                fresh = self._seat(fresh, max_rows)
                            if fresh.rows:
                                joined = fresh if joined is None else _merge(joined, fresh)
                            self.stats.merge_s += time.perf_counter() - t0
                if joined is not None:  # the running batch's cache copied once a round
                    t0 = time.perf_counter()
                    running = joined if running is None else _merge(running, joined)
                    self.stats.merge_s += time.perf_counter() - t0
                if running is None and not self._seated:
                    if new:
                        continue  # every new row finished on its first token; ask again
                    return
                if self._seated:  # one token-choosing step for both, however many batches
                    self._step_slots(deliver, count=running is None)
                if running is not None:
                    self._step(running, deliver)
                    if not running.rows:
                        running = None

    def _step(self, batch: _Batch, deliver: Callable[[Row, DecodeResult], None]) -> None:
        """One decoding step: feed every row its last token, choose and deliver the next."""
        step_ids = torch.tensor(batch.next_tokens, dtype=torch.long)[:, None]
        batch.mask = torch.cat(
            [batch.mask, torch.ones((len(batch.rows), 1), dtype=batch.mask.dtype)], dim=1)
        batch.last_pos = batch.last_pos + 1
        t0 = time.perf_counter()
        batch.logits = self._forward(step_ids, batch.mask, batch.last_pos[:, None], batch.cache)
        self.stats.step_s += time.perf_counter() - t0
        self.stats.steps += 1
        self.stats.step_rows += len(batch.rows)
        self._advance(batch, deliver)

    def _finish_batch(self, batch: _Batch, deliver: Callable[[Row, DecodeResult], None]) -> None:
        while batch.rows:
            self._step(batch, deliver)


@dataclass
class _Batch:
    """Rows sharing one KV cache; ``mask`` and ``last_pos`` describe each row's cache slot."""

    rows: list[Row]
    cache: Any
    mask: torch.Tensor  # [rows, cache length], 0 for left padding
    last_pos: torch.Tensor  # [rows] position id of the last token fed
    logits: torch.Tensor  # [rows, vocab] for the next token, fp32 on the model's device
    next_tokens: list[int] = field(default_factory=list)

    def select(self, keep: list[int]) -> None:
        index = torch.tensor(keep, dtype=torch.long)
        self.rows = [self.rows[s] for s in keep]
        if not keep:
            return
        self.cache.batch_select_indices(index.to(_cache_device(self.cache)))
        self.mask, self.last_pos = self.mask[index], self.last_pos[index]
        # columns that only finished rows used are padding for everyone left: drop them
        used = self.mask.any(dim=0).nonzero()
        start = int(used[0]) if len(used) else 0
        if start:
            self.mask = self.mask[:, start:]
            for layer in self.cache.layers:
                layer.keys = layer.keys[:, :, start:, :]
                layer.values = layer.values[:, :, start:, :]


def _cache_device(cache: Any) -> torch.device:
    return cache.layers[0].keys.device


def _merge(a: _Batch, b: _Batch) -> _Batch:
    """One batch holding the rows of both, caches left-padded to a common length."""
    la, lb = a.mask.shape[1], b.mask.shape[1]
    width = max(la, lb)

    def pad(t: torch.Tensor, n: int, dim: int) -> torch.Tensor:
        if n == 0:
            return t
        shape = list(t.shape)
        shape[dim] = n
        return torch.cat([t.new_zeros(shape), t], dim=dim)

    for la_layer, lb_layer in zip(a.cache.layers, b.cache.layers):
        la_layer.keys = torch.cat([pad(la_layer.keys, width - la, 2),
                                   pad(lb_layer.keys, width - lb, 2)], dim=0)
        la_layer.values = torch.cat([pad(la_layer.values, width - la, 2),
                                     pad(lb_layer.values, width - lb, 2)], dim=0)
    a.mask = torch.cat([pad(a.mask, width - la, 1), pad(b.mask, width - lb, 1)], dim=0)
    a.last_pos = torch.cat([a.last_pos, b.last_pos])
    a.rows = a.rows + b.rows
    a.next_tokens = a.next_tokens + b.next_tokens
    return a
