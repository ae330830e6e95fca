"""The PPO learner on hand-made transitions over the tiny random model: no rollouts."""

from __future__ import annotations

import math

import pytest
import torch
from accelerate import Accelerator

from marag.config import load_config
from marag.llm.tiny import build_tiny_model
from marag.train.experience import Transition, batch
from marag.train.learner import Learner, LearnerError
from marag.train.policy import PolicyValue, attach_lora, token_stats


def learner(*overrides: str, seed: int = 0) -> tuple[Learner, object]:
    cfg = load_config(None, ["train.lora.r=4", "train.lora.target_modules=[q_proj,v_proj]",
                             "train.lr=1e-2", "train.dtype=float32", *overrides]).train
    model, tok = build_tiny_model(seed=seed)
    torch.manual_seed(seed)
    policy = PolicyValue(attach_lora(model, cfg.lora), model.config.hidden_size,
                         critic=cfg.critic)
    # a trained-looking adapter and critic, so that logprobs, values and KL are not trivial
    with torch.no_grad():
        for name, p in policy.named_parameters():
            if "lora_B" in name or name.startswith("value_head"):
                p.normal_(0, 0.05)
    allowed_ids = [tok.convert_tokens_to_ids("<|im_end|>"), *range(10, 40)]
    mask = torch.zeros(len(tok), dtype=torch.bool)
    mask[allowed_ids] = True

    def allowed(t: Transition) -> torch.Tensor | None:
        return mask if t.allowed_text else None

    lr = Learner(policy, cfg, Accelerator(cpu=True), reference=None,
                 pad_id=tok.pad_token_id, eos_ids=[tok.eos_token_id], allowed=allowed,
                 uses_kl=True)
    return lr, tok


def transitions(n: int = 6, restricted: bool = True) -> list[Transition]:
    """Steps of different lengths; the even ones decoded under a restricted vocabulary
    (tokens 10..39 and EOS), as the planner is on the hf backend."""
    g = torch.Generator().manual_seed(1)
    out = []
    for i in range(n):
        p_len, r_len = 5 + 3 * i, 1 + (i * 2) % 7
        prompt = torch.randint(40, 300, (p_len,), generator=g).tolist()
        resp = torch.randint(10, 40, (r_len,), generator=g).tolist()
        t = Transition(trace=i // 2, group=i // 4, order=i % 2, role="planner",
                       prompt_ids=prompt, response_ids=resp, rollout_logprobs=[0.0] * r_len,
                       temperature=0.8, allowed_text=("x",) if restricted and i % 2 == 0
                       else (), reward=float(i % 3) - 1.0)
        out.append(t)
    return out


def fill(lr: Learner, items: list[Transition]) -> None:
    lr.score(items)
    for t in items:
        n = len(t.response_ids)
        t.advantages = torch.linspace(-1.0, 1.0, n) * t.reward + 0.3
        t.returns = torch.full((n,), t.reward)


def test_restricted_decoding_with_entropy_and_kl_loss_keeps_gradients_finite():
    """The pad token lies outside the restricted vocabulary: its logprob is -inf at padded
    positions, which made entropy (entr at p = 0) and k3 (-inf - -inf) NaN in the backward."""
    lr, _ = learner("train.entropy_coef=0.01", "train.kl_mode=loss", "train.kl_coef=0.1")
    items = transitions()
    fill(lr, items)
    for t in items:
        assert torch.isfinite(t.old_logprobs).all() and torch.isfinite(t.ref_logprobs).all()
    loss, stats = lr.loss(items, (sum(len(t.response_ids) for t in items), len(items)), 1,
                          True)
    loss.backward()
    assert math.isfinite(float(loss.detach())) and all(math.isfinite(v) for v in stats.values())
    grads = [p.grad for p in lr.policy_params if p.grad is not None]
    assert grads and all(torch.isfinite(g).all() for g in grads)
    assert any(float(g.abs().sum()) > 0 for g in grads)


def test_token_stats_zero_the_padded_positions():
    lr, _ = learner()
    items = transitions(4)
    b = batch(items, lr.pad_id)
    logp, ent, _ = token_stats(lr.policy, b, [lr.allowed(t) for t in items], entropy=True)
    pad = b.mask == 0
    assert pad.any()
    assert (logp[pad] == 0).all() and (ent[pad] == 0).all()
    assert torch.isfinite(logp).all() and (logp[~pad] < 0).all()


def test_the_micro_batch_split_does_not_change_the_update():
    states = []
    for micro in (1, 2, 6):
        lr, _ = learner(f"train.micro_batch_size={micro}", "train.minibatch_size=6",
                        "train.entropy_coef=0.01")
        items = transitions()
        fill(lr, items)
        lr.update(items, lambda epoch: 0)
        states.append({n: p.detach().clone() for n, p in lr.policy.named_parameters()
                       if p.requires_grad})
    for other in states[1:]:
        for name, p in states[0].items():
            assert torch.allclose(p, other[name], atol=1e-6), name


def test_sequence_mean_weighs_every_step_alike():
    from marag.train import core

    x = torch.tensor([[0.0, 0.0, 0.0, 1.0], [2.0, 2.0, 2.0, 2.0]])
    mask = torch.tensor([[0.0, 0.0, 0.0, 1.0], [1.0, 1.0, 1.0, 1.0]])
    assert float(core.aggregate(x, mask, "token-mean")) == pytest.approx(9 / 5)
    assert float(core.aggregate(x, mask, "seq-mean-token-mean")) == pytest.approx(1.5)
    lr, _ = learner("train.loss_agg=seq-mean-token-mean")
    items = transitions()
    fill(lr, items)
    stats = lr.update(items, lambda epoch: 0)
    assert math.isfinite(stats["pg_loss"]) and stats["optimizer_steps"] == 1


def test_policy_and_critic_gradients_are_clipped_apart():
    lr, _ = learner("train.max_grad_norm=0.01", "train.critic_max_grad_norm=1e9",
                    "train.vf_coef=100", "train.critic=detached")
    items = transitions()
    fill(lr, items)
    for t in items:
        t.returns = t.returns + 50.0  # a huge value loss
    loss, _ = lr.loss(items, (sum(len(t.response_ids) for t in items), len(items)), 1, True)
    loss.backward()
    norms = lr._clip()
    assert norms["grad_norm.value"] > 100 * norms["grad_norm"] > 0
    clipped = torch.sqrt(sum((p.grad ** 2).sum() for p in lr.policy_params if p.grad is not None))
    assert float(clipped) == pytest.approx(0.01, rel=1e-3)  # the policy's own budget
    value = torch.sqrt(sum((p.grad ** 2).sum() for p in lr.value_params))
    assert float(value) == pytest.approx(norms["grad_norm.value"], rel=1e-4)  # untouched


def test_a_detached_critic_leaves_the_adapter_to_the_policy_loss():
    lr, _ = learner("train.critic=detached")
    items = transitions()
    fill(lr, items)
    for t in items:
        t.advantages = torch.zeros(len(t.response_ids))  # no policy signal at all
    loss, _ = lr.loss(items, (sum(len(t.response_ids) for t in items), len(items)), 1, True)
    loss.backward()
    assert all(p.grad is None or float(p.grad.abs().sum()) == 0 for p in lr.policy_params)
    assert float(sum(p.grad.abs().sum() for p in lr.value_params)) > 0


def test_non_finite_gradients_skip_the_step_then_stop_training():
    lr, _ = learner("train.max_skipped_steps=2")
    items = transitions()
    fill(lr, items)
    before = {n: p.detach().clone() for n, p in lr.policy.named_parameters() if p.requires_grad}
    for t in items:
        t.advantages = torch.full((len(t.response_ids),), float("nan"))
    stats = lr.update(items, lambda epoch: 0)
    assert stats["skipped_steps"] == 1 and stats["optimizer_steps"] == 0
    after = dict(lr.policy.named_parameters())
    assert all(torch.equal(v, after[n]) for n, v in before.items())  # nothing was applied
    with pytest.raises(LearnerError, match="2 optimizer steps in a row"):
        lr.update(items, lambda epoch: 0)


def test_no_reference_pass_when_nothing_uses_the_kl():
    lr, _ = learner()
    lr.uses_kl = False
    items = transitions(3)
    lr.score(items)
    assert all(t.ref_logprobs is None and t.old_logprobs is not None for t in items)


def test_bf16_scoring_agrees_with_float32():
    """Old and reference logprobs and values under bf16 autocast against float32 on the same
    weights (the tiny random model's logprobs lie around -10): at most 0.25 nats per token
    apart, 0.04 on average."""
    fp32, _ = learner()
    bf16, _ = learner("train.dtype=bfloat16")
    bf16.policy.load_state_dict(fp32.policy.state_dict())
    a, b = transitions(), transitions()
    fp32.score(a)
    bf16.score(b)
    for key in ("old_logprobs", "ref_logprobs", "values"):
        diff = torch.cat([(getattr(x, key) - getattr(y, key)).abs() for x, y in zip(a, b)])
        assert float(diff.max()) < 0.25 and float(diff.mean()) < 0.04, key
        assert float(diff.max()) > 0  # bf16 really ran


def test_sharing_prompts_scores_and_updates_as_the_plain_forward():
    """``train.share_prompts``: the samples of a question share its prompt (here three
    prompts among six steps, responses of different lengths, some under a restricted
    vocabulary); scoring gives the same old logprobs and values, and one mini-batch of all
    of them the same update."""
    results = []
    for share in ("false", "true"):
        lr, _ = learner(f"train.share_prompts={share}", "train.minibatch_size=6",
                        "train.micro_batch_size=3", "train.entropy_coef=0.01")
        items = transitions()
        prompts = [t.prompt_ids for t in items[:3]]
        for i, t in enumerate(items):
            t.prompt_ids = prompts[i % 3]
        fill(lr, items)
        scored = [(t.old_logprobs.clone(), t.values.clone()) for t in items]

        def state(lr=lr):
            return {n: p.detach().clone() for n, p in lr.policy.named_parameters()
                    if p.requires_grad}

        before = state()
        assert lr.update(items, lambda epoch: 0)["optimizer_steps"] == 1
        after = state()
        assert any(not torch.equal(before[n], after[n]) for n in after)
        results.append((scored, after))
    (scored0, state0), (scored1, state1) = results
    for (lp0, v0), (lp1, v1) in zip(scored0, scored1):
        torch.testing.assert_close(lp1, lp0, atol=1e-5, rtol=1e-4)
        torch.testing.assert_close(v1, v0, atol=1e-5, rtol=1e-4)
    for name, p in state0.items():
        torch.testing.assert_close(state1[name], p, atol=1e-6, rtol=1e-5, msg=name)


def test_sharing_prompts_keeps_each_prompts_rows_in_one_mini_batch():
    lr, _ = learner("train.share_prompts=true")
    items = transitions(12)
    prompts = [t.prompt_ids for t in items[:3]]
    for i, t in enumerate(items):
        t.prompt_ids = prompts[i % 3]  # three questions, four samples each, interleaved
    order = lr._shuffled(items, torch.Generator().manual_seed(5))
    assert sorted(map(id, order)) == sorted(map(id, items))  # a permutation
    runs = [tuple(t.prompt_ids) for t in order]
    blocks = [runs[i] for i in range(len(runs)) if i == 0 or runs[i] != runs[i - 1]]
    assert len(blocks) == 3  # each prompt's rows contiguous: mini-batches of 4 hold one each
    plain, _ = learner()
    shuffled = plain._shuffled(items, torch.Generator().manual_seed(5))
    assert sorted(map(id, shuffled)) == sorted(map(id, items))


def test_frozen_weights_go_bf16_only_where_every_pass_autocasts():
    """LoRA's frozen linears are stored in bf16 on the CPU under bf16 compute; never on a GPU
    (the local decoder runs there without autocast, so float32-loaded weights stay float32),
    never sharded, never without LoRA or in float32."""
    from marag.train.learner import frozen_storage_dtype

    cpu, cuda = torch.device("cpu"), torch.device("cuda")
    assert frozen_storage_dtype("bfloat16", cpu, True, "") == torch.bfloat16
    assert frozen_storage_dtype("bfloat16", cuda, True, "") is None
    assert frozen_storage_dtype("bfloat16", cpu, True, "FSDP2") is None
    assert frozen_storage_dtype("bfloat16", cpu, False, "") is None
    assert frozen_storage_dtype("float32", cpu, True, "") is None
