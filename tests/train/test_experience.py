"""Traces -> transitions, and the advantage estimators over them."""

import math

import pytest
import torch

from marag.train import advantages
from marag.train.experience import batch, collect
from marag.types import Step, Trace


def _step(role, n=2, **kw):
    return Step(role=role, messages=[{"role": "user", "content": "q"}], raw="x",
                prompt_token_ids=[1, 2, 3], token_ids=list(range(10, 10 + n)),
                logprobs=[-0.5] * n, sampling={"temperature": 0.5, "top_p": 1.0, "seed": 1},
                **kw)


def _trace(qid, sample, rewards_roles):
    steps = [_step(role) if role != "R" else Step(role="R", raw="q") for role, _ in rewards_roles]
    return Trace(id=qid, question="q", method="jade", sample=sample, steps=steps), [
        r for _, r in rewards_roles]


def test_only_trained_roles_enter_and_frozen_rewards_move_back():
    t, r = _trace("a", 0, [("planner", -1.0), ("R", None), ("AG", 0.8)])
    trans = collect([t], [r], ["planner"])
    assert [x.role for x in trans] == ["planner"]
    assert trans[0].reward == pytest.approx(-1.0 + 0.8)  # AG's final F1 reaches the planner
    assert trans[0].temperature == 0.5 and trans[0].response_ids == [10, 11]
    both = collect([t], [r], ["planner", "AG"])
    assert [(x.role, x.reward, x.order) for x in both] == [("planner", -1.0, 0), ("AG", 0.8, 1)]


def test_a_step_without_token_ids_cannot_be_trained():
    t, r = _trace("a", 0, [("AG", 1.0)])
    t.steps[0].token_ids = None
    with pytest.raises(ValueError, match="no token ids"):
        collect([t], [r], ["AG"])


def _filled(trans):
    for x in trans:
        n = len(x.response_ids)
        x.old_logprobs = x.ref_logprobs = torch.zeros(n)
        x.values = torch.zeros(n)
    return trans


def test_grpo_compares_whole_traces_within_each_question():
    a0, ra0 = _trace("a", 0, [("QR", 1.0), ("DS", 1.0), ("AG", 1.0)])
    a1, ra1 = _trace("a", 1, [("QR", 0.0), ("DS", 0.0), ("AG", 0.0)])
    b0, rb0 = _trace("b", 0, [("QR", 0.5), ("AG", 0.5)])
    trans = _filled(collect([a0, a1, b0], [ra0, ra1, rb0], ["QR", "DS", "AG"]))
    advantages.compute(trans, "grpo", gamma=1.0, lam=1.0, kl_coef=0.0, kl_in_reward=False)
    by = {(x.trace, x.role): float(x.advantages[0]) for x in trans}
    # every step of the better sample of "a" is pushed up alike, of the worse one down alike
    assert by[(0, "QR")] == by[(0, "DS")] == by[(0, "AG")] == pytest.approx(1.0, abs=1e-4)
    assert by[(1, "QR")] == by[(1, "AG")] == pytest.approx(-1.0, abs=1e-4)
    assert by[(2, "QR")] == by[(2, "AG")] == 0.0  # a question with one sample: no signal


def test_batch_right_aligns_responses():
    t1, r1 = _trace("a", 0, [("AG", 1.0)])
    t2, r2 = _trace("b", 0, [("AG", 1.0)])
    t2.steps[0].token_ids = [7, 8, 9]
    t2.steps[0].logprobs = [0.0] * 3
    b = batch(collect([t1, t2], [r1, r2], ["AG"]), pad_id=0)
    assert b.keep == 3
    assert b.response_ids.tolist() == [[0, 10, 11], [7, 8, 9]]
    assert b.mask.tolist() == [[0.0, 1.0, 1.0], [1.0, 1.0, 1.0]]
    assert b.input_ids[0].tolist() == [0, 1, 2, 3, 10, 11]  # left-padded prompt + response
    assert b.attention_mask[0].tolist() == [0, 1, 1, 1, 1, 1]


def test_rloo_baseline_is_the_mean_of_the_other_samples():
    traces = [_trace("a", s, [("AG", r)]) for s, r in enumerate([1.0, 0.0, 0.5])]
    traces.append(_trace("b", 0, [("AG", 0.7)]))
    trans = _filled(collect([t for t, _ in traces], [r for _, r in traces], ["AG"]))
    advantages.compute(trans, "rloo", gamma=1.0, lam=1.0, kl_coef=0.0, kl_in_reward=False)
    got = [float(x.advantages[0]) for x in trans]
    assert got == pytest.approx([1.0 - 0.25, 0.0 - 0.75, 0.5 - 0.5, 0.0])


def test_dr_grpo_leaves_the_group_std_out():
    a0, r0 = _trace("a", 0, [("AG", 1.0)])
    a1, r1 = _trace("a", 1, [("AG", 0.5)])
    trans = _filled(collect([a0, a1], [r0, r1], ["AG"]))
    advantages.compute(trans, "grpo", gamma=1.0, lam=1.0, kl_coef=0.0, kl_in_reward=False,
                       scale_rewards="none")
    assert [float(x.advantages[0]) for x in trans] == pytest.approx([0.25, -0.25])


def test_flat_groups_are_the_questions_without_reward_spread():
    traces = [_trace("a", 0, [("AG", 1.0)]), _trace("a", 1, [("AG", 1.0)]),
              _trace("b", 0, [("AG", 0.0)]), _trace("b", 1, [("AG", 1.0)]),
              _trace("c", 0, [("AG", 0.3)])]
    trans = collect([t for t, _ in traces], [r for _, r in traces], ["AG"])
    assert advantages.flat_groups(trans) == {0, 2}  # "a" all equal, "c" alone


def test_explained_variance_of_the_critic():
    t, r = _trace("a", 0, [("AG", 1.0)])
    [x] = collect([t], [r], ["AG"])
    x.returns = torch.tensor([1.0, 0.0])
    x.values = torch.tensor([1.0, 0.0])
    assert advantages.explained_variance([x]) == pytest.approx(1.0)
    x.values = torch.tensor([0.0, 1.0])  # worse than predicting the mean
    assert advantages.explained_variance([x]) < 0


def test_explained_variance_is_undefined_when_the_returns_only_carry_rounding():
    # every reward 0: returns = advantages + values leaves float32 noise, not a spread
    t, r = _trace("a", 0, [("AG", 0.0)])
    [x] = collect([t], [r], ["AG"])
    x.values = torch.tensor([0.731, -0.412])
    x.returns = torch.tensor([3e-8, -2e-8])  # what advantages + values left in a run
    assert math.isnan(advantages.explained_variance([x]))
    x.returns = torch.tensor([0.0, 1e-3])  # a small real spread is still measured
    assert advantages.explained_variance([x]) < 0
