"""The shared-prompt forward: rows that share a prompt run it once, with the same logits,
values and gradients as the plain left-padded forward."""

from __future__ import annotations

import torch

from marag.config import load_config
from marag.llm.tiny import build_tiny_model
from marag.train.experience import Transition, batch, shared_batch
from marag.train.policy import PolicyValue, attach_lora, token_stats


def _policy(critic: str = "shared") -> PolicyValue:
    cfg = load_config(None, ["train.lora.r=4", "train.lora.target_modules=[q_proj,v_proj]"]).train
    model, _ = build_tiny_model(seed=0)
    torch.manual_seed(0)
    policy = PolicyValue(attach_lora(model, cfg.lora), model.config.hidden_size, critic=critic)
    with torch.no_grad():
        for name, p in policy.named_parameters():
            if "lora_B" in name or name.startswith("value_head"):
                p.normal_(0, 0.05)
    return policy


def _rows() -> list[Transition]:
    """Three prompts of different lengths; the first shared by three rows, the second by
    two, whose responses differ in length (1 to 6 tokens)."""
    g = torch.Generator().manual_seed(3)
    prompts = [torch.randint(40, 300, (n,), generator=g).tolist() for n in (9, 14, 5)]
    out = []
    for i, (p, r_len) in enumerate([(0, 3), (0, 1), (1, 6), (0, 5), (2, 2), (1, 4)]):
        resp = torch.randint(10, 40, (r_len,), generator=g).tolist()
        out.append(Transition(trace=i, group=0, order=0, role="AG", prompt_ids=prompts[p],
                              response_ids=resp, rollout_logprobs=[0.0] * r_len,
                              temperature=0.7))
    return out


def _stats(policy, b):
    logp, ent, values = token_stats(policy, b, [None] * b.response_ids.shape[0], entropy=True)
    return logp, ent, values


def test_shared_prompts_give_the_plain_forwards_logprobs_values_and_gradients():
    rows = _rows()
    plain, shared = batch(rows, 0, multiple=8), shared_batch(rows, 0, multiple=8)
    assert shared.shared is not None and shared.shared.prompt_ids.shape[0] == 3  # 3 distinct
    assert shared.input_ids.numel() == 0  # no full sequences are built
    assert torch.equal(plain.mask, shared.mask) and torch.equal(plain.response_ids,
                                                                  shared.response_ids)
    results = []
    for b in (plain, shared):
        policy = _policy()
        logp, ent, values = _stats(policy, b)
        m = b.mask
        # a loss touching every output the learner uses: logprobs, entropy, values
        loss = ((logp * m).sum() + (ent * m).sum() + (values * m).sum())
        loss.backward()
        grads = {n: p.grad.clone() for n, p in policy.named_parameters() if p.grad is not None}
        results.append((logp * m, ent * m, values * m, grads))
    (lp0, en0, v0, g0), (lp1, en1, v1, g1) = results
    torch.testing.assert_close(lp1, lp0, atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(en1, en0, atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(v1, v0, atol=1e-5, rtol=1e-4)
    assert g0.keys() == g1.keys() and any("lora" in n for n in g0)
    for n in g0:  # float32 sums in another order: equal to ~1e-6 of the gradient's scale
        scale = float(g0[n].abs().max())
        torch.testing.assert_close(g1[n], g0[n], atol=1e-5 * scale, rtol=1e-4, msg=n)


def test_one_token_responses_need_no_response_pass():
    rows = [Transition(trace=i, group=0, order=0, role="planner", prompt_ids=[50, 60, 70],
                       response_ids=[11 + i], rollout_logprobs=[0.0], temperature=1.0)
            for i in range(3)]
    shared = shared_batch(rows, 0)
    assert shared.shared.response_ids.shape == (3, 0)
    policy = _policy()
    with torch.no_grad():
        a = _stats(policy, batch(rows, 0))[0]
        b = _stats(policy, shared)[0]
    torch.testing.assert_close(b, a, atol=1e-5, rtol=1e-4)


def test_frozen_linears_stored_in_bf16_compute_what_autocast_computed():
    """``store_frozen_linears``: LoRA's frozen base weights kept in bf16 give exactly the
    bf16-autocast results of the float32 weights (autocast casts them anyway, at every
    call), gradients included; the output head and the adapter stay float32."""
    from marag.train.policy import store_frozen_linears

    rows = _rows()
    out = []
    for cast in (False, True):
        policy = _policy()
        if cast:
            n = store_frozen_linears(policy.causal_lm(), torch.bfloat16)
            assert n > 0
            lm = policy.causal_lm()
            assert lm.get_output_embeddings().weight.dtype == torch.float32
            assert all(p.dtype == torch.float32 for p in policy.parameters() if p.requires_grad)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            logp, _, values = _stats(policy, batch(rows, 0))
        loss = (logp * batch(rows, 0).mask).sum() + values.sum()
        loss.backward()
        out.append((logp.detach(), values.detach(),
                    {n: p.grad.clone() for n, p in policy.named_parameters() if p.grad is not None}))
    (lp0, v0, g0), (lp1, v1, g1) = out
    assert torch.equal(lp0, lp1) and torch.equal(v0, v1)
    assert g0.keys() == g1.keys()
    for n in g0:
        assert torch.equal(g0[n], g1[n]), n


def test_a_tied_head_wrapped_by_lora_keeps_the_embeddings_float32():
    """With ``lm_head`` among LoRA's targets on a model whose head is tied to the input
    embeddings, the head's frozen weight is the embedding matrix: it stays float32 (casting
    it would move the embeddings to bf16 too); the other frozen linears go to bf16."""
    from transformers import LlamaConfig, LlamaForCausalLM

    from marag.train.policy import store_frozen_linears

    config = LlamaConfig(vocab_size=64, hidden_size=16, intermediate_size=32,
                         num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1,
                         tie_word_embeddings=True)
    model = LlamaForCausalLM(config)
    assert model.get_output_embeddings().weight is model.get_input_embeddings().weight
    cfg = load_config(None, ["train.lora.r=2",
                             "train.lora.target_modules=[q_proj,lm_head]"]).train
    lm = attach_lora(model, cfg.lora)
    assert store_frozen_linears(lm, torch.bfloat16) > 0
    assert lm.get_input_embeddings().weight.dtype == torch.float32
    q = lm.base_model.model.model.layers[0].self_attn.q_proj.base_layer
    assert q.weight.dtype == torch.bfloat16
