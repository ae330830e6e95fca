"""A batched decoding loop over a transformers causal LM with a shared KV cache.

Why not ``model.generate``: every row here carries its own sampling parameters (temperature,
top-p, max tokens, stop strings, allowed tokens, seed), so requests from different callers
share one forward pass without being grouped by parameters; rows that finish (EOS, stop
string, length) leave the batch at once instead of being padded to the longest row; and the
logprob of each chosen token is computed in the same pass.

Logprobs: for a greedy row (temperature 0) they are ``log_softmax(logits)``; for a sampled
row ``log_softmax(logits / temperature)``, i.e. under the sampling temperature and before the
top-p cut, which is what a PPO trainer recomputes. ``allowed_text`` masks the logits first,
so logprobs are then renormalised over the allowed tokens.

Sampling draws from a per-row ``torch.Generator`` seeded from the request's seed, so a seeded
request samples the same tokens whether it runs alone or inside a batch.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field
from typing import Any

import torch

from marag.llm.base import SamplingParams


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


@dataclass
class DecodeResult:
    text: str
    finish_reason: str
    token_ids: list[int]
    logprobs: list[float]
    seconds: float


def _left_pad(rows: list[Row], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    width = max(len(r.prompt_ids) for r in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, r in enumerate(rows):
        n = len(r.prompt_ids)
        ids[i, width - n:] = torch.tensor(r.prompt_ids, dtype=torch.long)
        mask[i, width - n:] = 1
    return ids, mask


def _top_p_filter(probs: torch.Tensor, top_p: float) -> torch.Tensor:
    sorted_p, order = torch.sort(probs, descending=True)
    cum = torch.cumsum(sorted_p, dim=-1)
    # keep the smallest prefix whose mass reaches top_p (always at least the best token)
    drop = cum - sorted_p >= top_p
    sorted_p[drop] = 0.0
    out = torch.zeros_like(probs)
    out[order] = sorted_p
    return out / out.sum()


def _choose(rows: list[Row], logits: torch.Tensor) -> tuple[list[int], list[float]]:
    """Pick the next token for every row of ``logits`` [rows, vocab] (fp32)."""
    for i, r in enumerate(rows):
        if r.allowed is not None:
            logits[i].masked_fill_(~r.allowed, float("-inf"))
    temps = torch.tensor([r.params.temperature if r.params.temperature > 0 else 1.0
                          for r in rows], dtype=logits.dtype)
    logp = torch.log_softmax(logits / temps[:, None], dim=-1)
    greedy = torch.argmax(logits, dim=-1)
    tokens: list[int] = []
    for i, r in enumerate(rows):
        if r.params.temperature <= 0:
            tokens.append(int(greedy[i]))
            continue
        probs = logp[i].exp()
        if r.params.top_p < 1.0:
            probs = _top_p_filter(probs, r.params.top_p)
        tokens.append(int(torch.multinomial(probs, 1, generator=r.generator)))
    chosen = logp[torch.arange(len(rows)), torch.tensor(tokens)]
    return tokens, chosen.tolist()


class BatchDecoder:
    """Runs one batch of rows to completion. Not thread-safe: callers serialise ``run``."""

    def __init__(self, model: Any, tokenizer: Any, *, bf16_autocast: bool = False) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.bf16_autocast = bf16_autocast
        eos: set[int] = set()
        gen_eos = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
        for e in gen_eos if isinstance(gen_eos, list) else [gen_eos]:
            if e is not None:
                eos.add(int(e))
        if tokenizer.eos_token_id is not None:
            eos.add(int(tokenizer.eos_token_id))
        self.eos_ids = eos
        pad = tokenizer.pad_token_id
        self.pad_id = int(pad if pad is not None else min(eos) if eos else 0)
        self.max_positions = int(getattr(model.config, "max_position_embeddings", 0) or 0)
        self._rng = random.Random()

    def _forward(self, ids: torch.Tensor, mask: torch.Tensor, pos: torch.Tensor,
                 cache: Any) -> torch.Tensor:
        device = self.model.device
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=self.bf16_autocast
                            and device.type == "cpu"):
            out = self.model(input_ids=ids.to(device), attention_mask=mask.to(device),
                             position_ids=pos.to(device), past_key_values=cache,
                             use_cache=True, logits_to_keep=1)
        return out.logits[:, -1, :].float().cpu()

    def _finish(self, row: Row, token: int, logprob: float) -> bool:
        row.token_ids.append(token)
        row.logprobs.append(logprob)
        p = row.params
        if token in self.eos_ids:
            row.finish_reason = "stop"
        elif p.stop:
            text = self.tokenizer.decode(row.token_ids, skip_special_tokens=True)
            cuts = [text.find(s) for s in p.stop if s and s in text]
            if cuts:
                row.text = text[: min(cuts)]
                row.finish_reason = "stop"
        if not row.finish_reason and len(row.token_ids) >= p.max_tokens:
            row.finish_reason = "length"
        if (not row.finish_reason and self.max_positions
                and len(row.prompt_ids) + len(row.token_ids) >= self.max_positions):
            row.finish_reason = "length"
        return bool(row.finish_reason)

    def run(self, rows: list[Row]) -> list[DecodeResult]:
        from transformers import DynamicCache

        t0 = time.perf_counter()
        for r in rows:
            if r.params.temperature > 0:
                seed = r.params.seed if r.params.seed is not None else self._rng.getrandbits(63)
                r.generator = torch.Generator().manual_seed(int(seed))
        with torch.inference_mode():
            ids, mask = _left_pad(rows, self.pad_id)
            pos = (mask.cumsum(-1) - 1).clamp(min=0)
            cache = DynamicCache(config=self.model.config)
            logits = self._forward(ids, mask, pos, cache)
            last_pos = pos[:, -1]
            active = list(range(len(rows)))  # row index of each cache slot
            while active:
                tokens, lps = _choose([rows[i] for i in active], logits)
                keep = [slot for slot, i in enumerate(active)
                        if not self._finish(rows[i], tokens[slot], lps[slot])]
                if not keep:
                    break
                if len(keep) < len(active):
                    index = torch.tensor(keep, dtype=torch.long)
                    cache.batch_select_indices(index.to(self.model.device))
                    mask, last_pos = mask[index], last_pos[index]
                    active = [active[s] for s in keep]
                    tokens = [tokens[s] for s in keep]
                mask = torch.cat([mask, torch.ones((len(active), 1), dtype=mask.dtype)], dim=1)
                last_pos = last_pos + 1
                step_ids = torch.tensor(tokens, dtype=torch.long)[:, None]
                logits = self._forward(step_ids, mask, last_pos[:, None], cache)
        seconds = time.perf_counter() - t0
        out = []
        for r in rows:
            text = r.text
            if text is None:
                text = self.tokenizer.decode(r.token_ids, skip_special_tokens=True)
            out.append(DecodeResult(text, r.finish_reason, r.token_ids, r.logprobs, seconds))
        return out
