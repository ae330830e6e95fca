"""The algorithms against hand computations."""

import math

import pytest
import torch

from marag.train import core


def test_gae_matches_hand_computation():
    r = torch.tensor([0.0, 0.0, 1.0])
    v = torch.tensor([0.5, 0.2, 0.4])
    g, lam = 0.9, 0.8
    d2 = 1.0 + 0 - 0.4
    d1 = 0.0 + g * 0.4 - 0.2
    d0 = 0.0 + g * 0.2 - 0.5
    a2 = d2
    a1 = d1 + g * lam * a2
    a0 = d0 + g * lam * a1
    adv, ret = core.gae(r, v, g, lam)
    assert adv.tolist() == pytest.approx([a0, a1, a2])
    assert ret.tolist() == pytest.approx([a0 + 0.5, a1 + 0.2, a2 + 0.4])


def test_gae_with_lambda_one_is_monte_carlo():
    r = torch.tensor([0.1, -1.0, 0.0, 2.0])
    v = torch.tensor([0.3, 0.0, 0.7, -0.2])
    _, ret = core.gae(r, v, 1.0, 1.0)
    assert ret.tolist() == pytest.approx([1.1, 1.0, 2.0, 2.0])


def test_chained_gae_gives_a_planner_step_credit_for_the_terminal_reward():
    planner = torch.zeros(3)  # a planner step of 3 tokens, no reward of its own
    answer = torch.tensor([0.0, 1.0])  # the answer step earns F1 = 1 on its last token
    zeros = [torch.zeros(3), torch.zeros(2)]
    adv, _ = core.chained_gae([planner, answer], zeros, gamma=1.0, lam=1.0)
    assert [a.tolist() for a in adv] == [[1.0, 1.0, 1.0], [1.0, 1.0]]
    # each step alone (the per-step estimator) leaves the planner with nothing
    alone, _ = core.gae(planner, torch.zeros(3), 1.0, 1.0)
    assert alone.tolist() == [0.0, 0.0, 0.0]
    # with gamma < 1 the credit decays with the distance in tokens
    adv, _ = core.chained_gae([planner, answer], zeros, gamma=0.5, lam=1.0)
    assert adv[0].tolist() == pytest.approx([0.5 ** 4, 0.5 ** 3, 0.5 ** 2])
    assert [a.shape[0] for a in adv] == [3, 2]


def test_group_advantages_normalise_within_each_question():
    returns = torch.tensor([1.0, 0.0, 0.5, 0.5, 2.0])
    groups = [0, 0, 1, 1, 2]
    mean, std = core.group_advantages(returns, groups, eps=0.0)
    assert mean.tolist() == [0.5, 0.5, 0.5, 0.5, 2.0]
    assert std[:2].tolist() == [0.5, 0.5]
    adv = (returns - mean) / std
    assert adv[:2].tolist() == [1.0, -1.0]
    mean, std = core.group_advantages(returns, groups)  # default eps guards a zero std
    adv = (returns - mean) / std
    assert adv[2:4].tolist() == [0.0, 0.0]  # equal returns: no signal, no division by 0
    assert adv[4].item() == 0.0  # a group of one


def test_policy_loss_matches_hand_computation():
    old = torch.log(torch.tensor([[0.5, 0.5]]))
    new = torch.log(torch.tensor([[0.8, 0.25]]))  # ratios 1.6 and 0.5
    adv = torch.tensor([[1.0, -2.0]])
    mask = torch.ones(1, 2)
    loss, stats = core.policy_loss(new, old, adv, mask, clip=0.2)
    # token 0: min(1.6*1, 1.2*1) = 1.2 -> -1.2 ; token 1: min(0.5*-2, 0.8*-2) = -1.6 -> 1.6
    assert loss.item() == pytest.approx((-1.2 + 1.6) / 2)
    assert stats["clipfrac"].item() == pytest.approx(1.0)
    # a masked-out token does not count; a fixed denominator divides the sum
    mask = torch.tensor([[1.0, 0.0]])
    assert core.policy_loss(new, old, adv, mask, 0.2)[0].item() == pytest.approx(-1.2)
    assert core.policy_loss(new, old, adv, mask, 0.2, denom=4)[0].item() == pytest.approx(-0.3)


def test_policy_loss_gradient_vanishes_outside_the_trust_region():
    old = torch.zeros(1, 1)
    new = torch.tensor([[math.log(1.5)]], requires_grad=True)
    loss, _ = core.policy_loss(new, old, torch.ones(1, 1), torch.ones(1, 1), clip=0.2)
    loss.backward()
    assert new.grad.item() == 0.0  # ratio 1.5 > 1.2 with A > 0: clipped, no push further


def test_value_loss_matches_hand_computation():
    v = torch.tensor([[1.0, 0.0]])
    old = torch.tensor([[0.5, 0.0]])
    ret = torch.tensor([[2.0, 1.0]])
    loss, stats = core.value_loss(v, old, ret, torch.ones(1, 2), clip=0.2)
    # token 0: unclipped (1-2)^2 = 1, clipped v=0.7 -> 1.69 -> 1.69 ; token 1: 1, 1 -> 1
    assert loss.item() == pytest.approx(0.5 * (1.69 + 1.0) / 2)
    assert stats["vf_clipfrac"].item() == pytest.approx(0.5)


def test_kl_estimators():
    logp = torch.log(torch.tensor([0.5, 0.2]))
    ref = torch.log(torch.tensor([0.25, 0.2]))
    assert core.kl_k1(logp, ref).tolist() == pytest.approx([math.log(2), 0.0])
    r = math.log(0.5)
    assert core.kl_k3(logp, ref).tolist() == pytest.approx([math.exp(r) - r - 1, 0.0])
    assert (core.kl_k3(torch.randn(100), torch.randn(100)) >= 0).all()


def test_masked_mean_ignores_inf_at_masked_positions():
    x = torch.tensor([[1.0, float("-inf")], [3.0, float("nan")]])
    m = torch.tensor([[1.0, 0.0], [1.0, 0.0]])
    assert core.masked_mean(x, m).item() == 2.0
    assert core.masked_mean(x, m, denom=4).item() == 1.0


def test_adaptive_kl_moves_towards_target():
    ctl = core.AdaptiveKL(0.1, target=0.05, horizon=100)
    assert ctl.update(0.2, 10) == pytest.approx(0.1 * 1.02)  # too much KL: raise, capped
    fixed = core.AdaptiveKL(0.1, target=None, horizon=100)
    assert fixed.update(5.0, 10) == 0.1


def test_turn_level_gae_gives_the_planner_the_final_reward():
    """A hand-computed JADE trace: planner (6 tokens) -> QDS (128 tokens) -> AG (12 tokens)
    with F1 = 0.8 on the answer. Token-level GAE with lam 0.95 leaves the planner 0.95^140 of
    it; turn-level GAE with gamma = lam = 1 gives it 0.8 minus its own value."""
    from marag.train import advantages
    from marag.train.experience import Transition

    lengths = {"planner": 6, "QDS": 128, "AG": 12}
    values = {"planner": 0.1, "QDS": 0.3, "AG": 0.5}
    steps = []
    for order, (role, n) in enumerate(lengths.items()):
        t = Transition(trace=0, group=0, order=order, role=role, prompt_ids=[1],
                       response_ids=[2] * n, rollout_logprobs=[0.0] * n, temperature=1.0,
                       reward=0.8 if role == "AG" else 0.0)
        t.old_logprobs = t.ref_logprobs = torch.zeros(n)
        t.values = torch.full((n,), values[role])  # the step's value is read at position 0
        steps.append(t)
    advantages.compute(steps, "turn-gae", gamma=1.0, lam=1.0, kl_coef=0.0,
                       kl_in_reward=False)
    planner, qds, ag = steps
    assert planner.advantages.tolist() == pytest.approx([0.8 - 0.1] * 6)
    assert qds.advantages.tolist() == pytest.approx([0.8 - 0.3] * 128)
    assert ag.advantages.tolist() == pytest.approx([0.8 - 0.5] * 12)
    assert planner.returns[0].item() == pytest.approx(0.8)
    assert planner.value_mask.tolist() == [1.0] + [0.0] * 5  # one value per step
    # lam < 1 discounts per step, not per token: the planner is two steps from the answer
    advantages.compute(steps, "turn-gae", gamma=1.0, lam=0.5, kl_coef=0.0,
                       kl_in_reward=False)
    d = [0.0 + 0.3 - 0.1, 0.0 + 0.5 - 0.3, 0.8 - 0.5]
    assert planner.advantages[0].item() == pytest.approx(d[0] + 0.5 * d[1] + 0.25 * d[2])
    # token-level chained GAE, lam 0.95: the final reward barely reaches the planner
    for t in steps:
        t.values = torch.zeros(len(t.response_ids))
    advantages.compute(steps, "gae", gamma=1.0, lam=0.95, kl_coef=0.0, kl_in_reward=False)
    assert planner.advantages[-1].item() == pytest.approx(0.8 * 0.95 ** 140, rel=1e-5)
    assert planner.advantages[-1].item() < 0.001


def test_per_step_credit_keeps_each_steps_reward_its_own():
    """MAO-ARAG scores each planner turn alone; MMOA-RAG keeps each agent's penalty to
    itself: the per-step estimator gives a step its own reward minus its own value."""
    from marag.train import advantages
    from marag.train.experience import Transition

    rewards = [0.7, 0.7 - 1.0, 0.7]  # e.g. QR, DS (penalised), AG
    steps = []
    for order, r in enumerate(rewards):
        t = Transition(trace=0, group=0, order=order, role="x", prompt_ids=[1],
                       response_ids=[2, 3], rollout_logprobs=[0.0, 0.0], temperature=1.0,
                       reward=r)
        t.old_logprobs = t.ref_logprobs = t.values = torch.zeros(2)
        steps.append(t)
    advantages.compute(steps, "per-step", gamma=1.0, lam=1.0, kl_coef=0.0, kl_in_reward=False)
    assert [t.advantages[0].item() for t in steps] == pytest.approx(rewards)


def test_grpo_advantages_ignore_the_kl_penalty():
    """Two samples that both scored 0: equal task returns, so zero advantages, whatever their
    KL; a KL penalty in the reward is refused (it would decide the signs)."""
    from marag.train import advantages
    from marag.train.experience import Transition

    steps = []
    for trace, kl in enumerate((0.1, 0.9)):
        t = Transition(trace=trace, group=0, order=0, role="AG", prompt_ids=[1],
                       response_ids=[2, 3], rollout_logprobs=[0.0, 0.0], temperature=1.0,
                       reward=0.0)
        t.old_logprobs, t.ref_logprobs = torch.full((2,), kl), torch.zeros(2)
        steps.append(t)
    advantages.compute(steps, "grpo", gamma=1.0, lam=1.0, kl_coef=0.0, kl_in_reward=False)
    assert [t.advantages.tolist() for t in steps] == [[0.0, 0.0], [0.0, 0.0]]
    with pytest.raises(ValueError, match="kl_mode: loss"):
        advantages.compute(steps, "grpo", gamma=1.0, lam=1.0, kl_coef=0.1, kl_in_reward=True)
    steps[0].reward = 1.0
    advantages.compute(steps, "grpo", gamma=1.0, lam=1.0, kl_coef=0.0, kl_in_reward=False,
                       scale_rewards="none")
    assert [t.advantages[0].item() for t in steps] == [0.5, -0.5]
    advantages.compute(steps, "grpo", gamma=1.0, lam=1.0, kl_coef=0.0, kl_in_reward=False)
    assert steps[0].advantages[0].item() == pytest.approx(1.0, abs=1e-4)


def test_k3_is_clamped_and_finite():
    logp = torch.tensor([-0.1, -50.0, 0.0])
    ref = torch.tensor([-0.1, -0.1, -80.0])
    k3 = core.kl_k3(logp, ref)
    assert k3[0].item() == 0.0
    assert k3[1].item() == core.K3_MAX  # exp(49.9) would overflow the statistics
    assert torch.isfinite(k3).all() and (k3 >= 0).all()


def test_dual_clip_bounds_a_negative_advantage_loss():
    old = torch.zeros(1, 2)
    logp = torch.tensor([[5.0, 0.0]])  # ratio e^5 ~ 148 on the first token
    adv = torch.tensor([[-1.0, -1.0]])
    mask = torch.ones(1, 2)
    plain, _ = core.policy_loss(logp, old, adv, mask, 0.2)
    dual, stats = core.policy_loss(logp, old, adv, mask, 0.2, clip_ratio_c=3.0)
    assert plain.item() == pytest.approx((math.exp(5.0) + 1.0) / 2)
    assert dual.item() == pytest.approx((3.0 + 1.0) / 2)
    assert stats["clipfrac_c"].item() == 0.5


def test_entropy_is_safe_at_disallowed_tokens():
    logits = torch.tensor([[1.0, 2.0, float("-inf")]], requires_grad=True)
    ent = core.entropy(torch.log_softmax(logits, -1))
    ent.sum().backward()
    p = torch.softmax(torch.tensor([1.0, 2.0]), -1)
    assert ent.item() == pytest.approx(float(-(p * p.log()).sum()))
    assert torch.isfinite(logits.grad).all()


def test_the_kl_controller_reaches_its_target_within_a_few_horizons():
    """A policy whose KL falls as the coefficient rises (kl = 0.6 / coef), starting 50% above
    a target of 0.1: with 64 sequences per iteration and a horizon of 640, the coefficient
    closes most of the gap in one horizon and the KL is within 1% of the target in five."""
    ctl = core.AdaptiveKL(coef=4.0, target=0.1, horizon=640)
    kls = []
    for _ in range(50):  # 50 iterations x 64 sequences = 5 horizons
        kl = 0.6 / ctl.coef
        kls.append(kl)
        ctl.update(kl, 64)
    assert kls[0] == pytest.approx(0.15)
    assert abs(kls[10] - 0.1) < 0.5 * abs(kls[0] - 0.1)
    assert kls[-1] == pytest.approx(0.1, rel=0.01)


def test_the_kl_coefficient_stays_within_its_bounds():
    ctl = core.AdaptiveKL(coef=0.11, target=0.05, horizon=10, low=0.06, high=0.2)
    for _ in range(50):
        ctl.update(1.0, 64)  # KL far above target: the coefficient rises to its ceiling
    assert ctl.coef == 0.2
    for _ in range(50):
        ctl.update(0.0, 64)
    assert ctl.coef == 0.06


def test_clip_higher_lets_a_rising_token_go_further():
    from marag.train.core import policy_loss

    logp, old = torch.log(torch.tensor([[1.26]])), torch.zeros(1, 1)
    adv, mask = torch.ones(1, 1), torch.ones(1, 1)
    sym, _ = policy_loss(logp, old, adv, mask, 0.2, clip_ratio_c=None)
    high, _ = policy_loss(logp, old, adv, mask, 0.2, clip_ratio_c=None, clip_high=0.28)
    assert float(sym) == pytest.approx(-1.2) and float(high) == pytest.approx(-1.26)


def test_dr_grpo_aggregation_divides_by_a_constant_not_the_length():
    from marag.train.core import aggregate

    x = torch.tensor([[1.0, 1.0, 1.0, 1.0], [0.0, 0.0, 2.0, 2.0]])
    mask = torch.tensor([[1.0, 1.0, 1.0, 1.0], [0.0, 0.0, 1.0, 1.0]])
    # sums 4 and 4, over the constant 8, mean over the 2 sequences
    assert float(aggregate(x, mask, "seq-mean-token-sum-norm", norm_tokens=8)) == 0.5
    assert float(aggregate(x, mask, "seq-mean-token-mean")) == 1.5
