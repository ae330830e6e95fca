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
