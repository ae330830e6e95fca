"""Rewards and advantages for the transitions of one iteration.

Four estimators (``train.estimator``):

* ``turn-gae``: GAE over each trace's trained steps with one value per step (taken at the
  step's last prompt token) and the discount applied per step (``core.turn_gae``); a step's
  advantage goes on every token of its reply. A reward at the final answer reaches the
  planner whatever the length of the replies in between: JADE's credit (Algorithm 2).
* ``gae``: token-level GAE over each trace's trained steps laid end to end
  (``core.chained_gae``). The discount and lambda apply per *token*, so with lam < 1 a
  reward decays by lam^N over the N tokens between it and the planner; kept for
  comparison with earlier runs.
* ``per-step``: every step is an episode of its own: its advantage is its own reward minus
  its own value (per-turn credit: MAO-ARAG Eq. 9, where each planner turn is scored alone;
  per-agent credit: MMOA-RAG, where each agent's penalty stays its own; M-ASK, whose
  turn-level rewards are already differences).
* ``grpo``: no critic; every step of a trace gets the trace's *task* return (the sum of its
  steps' rewards, without any KL term) minus the mean return of its question's group,
  divided by that group's std unless ``scale_rewards`` is ``none`` (Dr. GRPO). The KL to
  the reference then goes into the loss (the trainer refuses ``kl_mode: reward`` with grpo).
* ``rloo``: no critic; the trace's task return minus the mean return of the *other*
  samples of its question (REINFORCE leave-one-out), never scaled.

A transition with a ``loss_mask`` (a multi-turn trajectory as one sequence) has
observation tokens inside its response: they carry no reward or KL, and ``gae`` runs over
the model's own tokens only, as if the observations were not there.

Turn-level estimators (``turn-gae``, ``per-step``) set ``Transition.value_mask`` to the
step's first response position: that is where its value was read, and the only position
the value loss trains.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from marag.train import core
from marag.train.experience import Transition, by_trace

ESTIMATORS = ("turn-gae", "gae", "per-step", "grpo", "rloo")
CRITIC_FREE = frozenset({"grpo", "rloo"})


def token_rewards(t: Transition, kl_coef: float, kl_in_reward: bool) -> torch.Tensor:
    """The step's scalar reward on its last token, minus ``kl_coef * k1`` on every token
    when the KL penalty goes into the reward."""
    r = torch.zeros(len(t.response_ids))
    if kl_in_reward and kl_coef:
        assert t.old_logprobs is not None and t.ref_logprobs is not None
        r -= kl_coef * core.kl_k1(t.old_logprobs, t.ref_logprobs)
        if t.loss_mask is not None:
            r *= torch.tensor(t.loss_mask, dtype=r.dtype)
    r[-1] += t.reward
    return r



def compute(transitions: Sequence[Transition], estimator: str, *, gamma: float, lam: float,
            kl_coef: float, kl_in_reward: bool, scale_rewards: str = "group") -> None:
    """Fill ``advantages`` and ``returns`` (and ``value_mask`` for the turn-level
    estimators) of every transition; not yet whitened."""
    if estimator in CRITIC_FREE:
        if kl_in_reward and kl_coef:
            raise ValueError(f"{estimator} compares returns within a group: the KL penalty "
                             "must go into the loss (kl_mode: loss), not into the reward")
        _group_baseline(transitions, estimator, scale_rewards)
        return
    rewards = {id(t): token_rewards(t, kl_coef, kl_in_reward) for t in transitions}
    if estimator == "gae":
        for steps in by_trace(transitions):
            keep = [t.trained_mask() for t in steps]
            adv, ret = core.chained_gae([rewards[id(t)][k] for t, k in zip(steps, keep)],
                                        [_values(t)[k] for t, k in zip(steps, keep)],
                                        gamma, lam)
            for t, k, a, r in zip(steps, keep, adv, ret):
                full_a, full_r = torch.zeros(len(t.response_ids)), torch.zeros(len(t.response_ids))
                full_a[k], full_r[k] = a, r
                t.advantages, t.returns, t.value_mask = full_a, full_r, None
    elif estimator in ("turn-gae", "per-step"):
        episodes = (by_trace(transitions) if estimator == "turn-gae"
                    else [[t] for t in transitions])
        for steps in episodes:
            r = torch.stack([rewards[id(t)].sum() for t in steps])
            v = torch.stack([_values(t)[0] for t in steps])
            adv, ret = core.turn_gae(r, v, gamma, lam)
            for t, a, g in zip(steps, adv.tolist(), ret.tolist()):
                n = len(t.response_ids)
                t.advantages = torch.full((n,), a)
                t.returns = torch.full((n,), g)
                t.value_mask = torch.zeros(n)
                t.value_mask[0] = 1.0
    else:
        raise ValueError(f"unknown estimator {estimator!r}; known: {list(ESTIMATORS)}")


def _group_baseline(transitions: Sequence[Transition], estimator: str,
                    scale_rewards: str) -> None:
    traces = by_trace(transitions)
    returns = torch.tensor([sum(t.reward for t in steps) for steps in traces],
                           dtype=torch.float64)
    groups = [steps[0].group for steps in traces]
    if estimator == "rloo":
        base, scale = core.leave_one_out(returns, groups), torch.ones_like(returns)
    else:
        base, scale = core.group_advantages(returns, groups)
        if scale_rewards == "none":
            scale = torch.ones_like(returns)
        elif scale_rewards != "group":
            raise ValueError(f"unknown scale_rewards {scale_rewards!r}")
    for i, steps in enumerate(traces):
        a = float(returns[i] - base[i]) / float(scale[i])
        for t in steps:
            t.advantages = torch.full((len(t.response_ids),), a)
            t.returns = torch.full((len(t.response_ids),), float(returns[i]))
            t.value_mask = None


def flat_groups(transitions: Sequence[Transition]) -> set[int]:
    """The groups (questions) whose samples all earned the same return: a group baseline
    gives each of them advantage 0, so they add cost and no signal (DAPO's dynamic sampling
    drops them). A group of one sample is flat."""
    returns: dict[int, set[float]] = {}
    for steps in by_trace(transitions):
        returns.setdefault(steps[0].group, set()).add(round(sum(t.reward for t in steps), 9))
    return {g for g, r in returns.items() if len(r) == 1}


def explained_variance(transitions: Sequence[Transition]) -> float:
    """The critic's explained variance over the positions its loss trains (NaN when no
    transition has values and returns, or the returns do not vary)."""
    vals, rets = [], []
    for t in transitions:
        if t.values is None or t.returns is None:
            continue
        where = t.trained_mask() if t.value_mask is None else t.value_mask.bool()
        vals.append(t.values[where])
        rets.append(t.returns[where])
    if not vals:
        return float("nan")
    return core.explained_variance(torch.cat(vals), torch.cat(rets))


def _values(t: Transition) -> torch.Tensor:
    assert t.values is not None
    return t.values


def whiten_stats(transitions: Sequence[Transition]) -> tuple[float, float, float]:
    """``(sum, sum of squares, count)`` of all advantage tokens (summed across processes by
    the caller, so whitening is over the global batch)."""
    s = sq = n = 0.0
    for t in transitions:
        assert t.advantages is not None
        a = t.advantages[t.trained_mask()]  # observations inside a response are not advantages
        s += float(a.sum())
        sq += float((a ** 2).sum())
        n += a.numel()
    return s, sq, n


def apply_whitening(transitions: Sequence[Transition], total: float, total_sq: float,
                    count: float, eps: float = 1e-8) -> None:
    if count == 0:
        return
    mean = total / count
    var = max(total_sq / count - mean * mean, 0.0)
    scale = (var + eps) ** -0.5
    for t in transitions:
        assert t.advantages is not None
        t.advantages = (t.advantages - mean) * scale
