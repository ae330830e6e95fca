"""Chunked scoring (policy.token_scores) against the whole-vocabulary computation it replaced:
the same log-probabilities, entropies and gradients on the tiny model, with restricted
vocabularies, per-row temperatures, padding, chunks of any size, LoRA or full fine-tuning,
and a bfloat16 head scored without a float32 copy of it."""

from __future__ import annotations

import pytest
import torch
from tests.train.conftest import tiny_policy

from marag.llm.tiny import build_tiny_model
from marag.train.experience import Transition, batch
from marag.train.policy import (
    PolicyValue,
    ReferenceLM,
    last_hidden,
    lm_logits,
    token_stats,
)


def old_token_stats(module, b, allowed, entropy=False, with_values=True):
    """token_stats as it was before issue 40: float32 logits over the whole vocabulary for
    every position, from a float32 copy of the head."""
    from marag.train.core import entropy as entropy_of

    lm = module.causal_lm() if isinstance(module, PolicyValue) else module.lm
    hidden = last_hidden(lm, b.input_ids, b.attention_mask, b.keep)
    head = lm.get_output_embeddings()
    with torch.autocast(hidden.device.type, enabled=False):
        logits = torch.nn.functional.linear(hidden.float(), head.weight.float(),
                                            None if head.bias is None else head.bias.float())
    values = None
    if with_values:
        values = module.value_head(hidden.float()).squeeze(-1)
    logits = logits / b.temperature[:, None, None]
    if any(m is not None for m in allowed):
        logits = torch.stack([lg if m is None else lg.masked_fill(~m, float("-inf"))
                              for lg, m in zip(logits, allowed)])
    pad = b.mask == 0
    logp_all = torch.log_softmax(logits, dim=-1)
    logp = logp_all.gather(-1, b.response_ids.unsqueeze(-1)).squeeze(-1).masked_fill(pad, 0.0)
    ent = entropy_of(logp_all).masked_fill(pad, 0.0) if entropy else None
    return logp, ent, values


def _policy(lora: bool = True, dtype: torch.dtype = torch.float32):
    policy, _, tok = tiny_policy(lora=lora, dtype=dtype)
    return policy, tok


def _items(tok):
    """Responses of 1..7 tokens (padding in the batch), temperatures 0.5..1.3, every other
    row decoded under a restricted vocabulary that holds its own tokens but not the pad."""
    g = torch.Generator().manual_seed(2)
    items, allowed = [], []
    mask = torch.zeros(len(tok), dtype=torch.bool)
    mask[[tok.convert_tokens_to_ids("<|im_end|>"), *range(10, 40)]] = True
    for i in range(5):
        p_len, r_len = 4 + 3 * i, [3, 1, 7, 5, 2][i]
        items.append(Transition(
            trace=i, group=0, order=0, role="AG",
            prompt_ids=torch.randint(40, 300, (p_len,), generator=g).tolist(),
            response_ids=torch.randint(10, 40, (r_len,), generator=g).tolist(),
            rollout_logprobs=[0.0] * r_len, temperature=0.5 + 0.2 * i))
        allowed.append(mask if i % 2 == 0 else None)
    b = batch(items, tok.pad_token_id)
    assert (b.mask == 0).any()
    return b, allowed


def _loss(logp, ent, values, b):
    m = b.mask
    w = torch.linspace(-1, 1, m.shape[1])
    return (logp * m * w).sum() + 0.1 * (ent * m).sum() + (values * m).sum()


@pytest.mark.parametrize("restricted", [True, False])
def test_chunked_scores_equal_the_whole_vocabulary_ones(restricted):
    policy, tok = _policy()
    b, allowed = _items(tok)
    allowed = allowed if restricted else [None] * len(allowed)
    with torch.no_grad():
        ref = old_token_stats(policy, b, allowed, entropy=True)
        for chunk in (1, 3, 4, 1000, None):
            new = token_stats(policy, b, allowed, entropy=True, chunk=chunk)
            for a, c in zip(ref, new):
                torch.testing.assert_close(c, a, rtol=1e-5, atol=1e-5)
    pad = b.mask == 0
    assert (new[0][pad] == 0).all() and (new[1][pad] == 0).all()


@pytest.mark.parametrize("lora", [True, False])
def test_chunked_scores_give_the_same_gradients(lora):
    """chunk 3 over 18 response tokens: 6 chunks, each recomputed in the backward pass (the
    gradients differ from one pass over all positions in float rounding only)."""
    grads = []
    for new in (False, True):
        policy, tok = _policy(lora=lora)
        b, allowed = _items(tok)
        stats = (token_stats(policy, b, allowed, entropy=True, chunk=3) if new
                 else old_token_stats(policy, b, allowed, entropy=True))
        _loss(*stats, b).backward()
        grads.append({n: p.grad.clone() for n, p in policy.named_parameters()
                      if p.grad is not None})
    assert grads[0].keys() == grads[1].keys() and len(grads[0]) > 2
    if not lora:
        assert "backbone.lm_head.weight" in grads[1]
    for name, g in grads[0].items():
        torch.testing.assert_close(grads[1][name], g, rtol=1e-4, atol=1e-4)


def test_the_reference_scores_as_before():
    model, tok = build_tiny_model(seed=1)
    ref = ReferenceLM(model).eval()
    b, allowed = _items(tok)
    with torch.no_grad():
        old = old_token_stats(ref, b, allowed, with_values=False)
        logp, ent, values = token_stats(ref, b, allowed, with_values=False, chunk=2)
    assert ent is None and values is None and old[1] is None
    torch.testing.assert_close(logp, old[0], rtol=1e-5, atol=1e-5)


def test_a_bfloat16_head_scores_in_bfloat16_without_a_float32_copy(monkeypatch):
    """A bfloat16 model: the head's logits come in bfloat16, as the model's own forward (and
    so the decoder) computes them, upcast per chunk; they stay within bfloat16's rounding of
    the float32 ones, and no float32 tensor the size of the head is made."""
    policy, tok = _policy(dtype=torch.bfloat16)
    b, allowed = _items(tok)
    head = policy.causal_lm().get_output_embeddings().weight
    made = []
    real_linear = torch.nn.functional.linear

    def linear(x, w, bias=None):
        made.append((x.dtype, w.dtype, tuple(x.shape), tuple(w.shape)))
        return real_linear(x, w, bias)

    with torch.no_grad():
        old_logp, old_ent, _ = old_token_stats(policy, b, allowed, entropy=True)
        monkeypatch.setattr(torch.nn.functional, "linear", linear)
        logp, ent, _ = token_stats(policy, b, allowed, entropy=True, chunk=4)
        monkeypatch.undo()
        # the model's own logits, as the decoder reads them
        lm = policy.causal_lm()
        hidden = last_hidden(lm, b.input_ids, b.attention_mask, b.keep)
        own = lm.lm_head(hidden).float()
        torch.testing.assert_close(lm_logits(lm, hidden), own, rtol=0, atol=0)
    heads = [m for m in made if m[3] == tuple(head.shape)]  # the output head's products
    assert heads and all(x == torch.bfloat16 and w == torch.bfloat16 for x, w, _, _ in heads)
    assert all(len(m[2]) == 2 and m[2][0] <= 4 for m in heads)  # chunks of 4 positions
    m = b.mask.bool()
    # bfloat16 keeps 8 bits: logits of size ~|10| are rounded by up to ~0.03
    assert float((logp - old_logp)[m].abs().max()) < 0.1
    assert float((ent - old_ent)[m].abs().max()) < 0.1
    assert torch.isfinite(logp).all() and logp.dtype == torch.float32
