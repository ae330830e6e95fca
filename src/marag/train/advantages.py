"""Per-token rewards and advantages for the transitions of one iteration.

Three estimators (``train.estimator``):

* ``gae``: GAE over each trace's trainable steps laid end to end (``core.chained_gae``), so a
  reward that arrives at the final answer reaches the planner's tokens (JADE Algorithm 2);
* ``per-step``: each step is an episode of its own, GAE inside its response (the authors'
  code for MMOA-RAG and JADE);
* ``grpo``: no critic; every step of a trace gets the trace's return (the sum of its steps'
  rewards) minus the mean return of its question's group, divided by that group's std. The
  comparison is trace against trace: a step's own reward-to-go against whole-trace returns
  would push every later step down whenever rewards repeat per step (MMOA-RAG, M-ASK).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from marag.train import core
from marag.train.experience import Transition, by_trace


def token_rewards(t: Transition, kl_coef: float, kl_in_reward: bool) -> torch.Tensor:
    """The step's scalar reward on its last token, minus ``kl_coef * k1`` on every token
    when the KL penalty goes into the reward."""
    assert t.old_logprobs is not None and t.ref_logprobs is not None
    r = torch.zeros(len(t.response_ids))
    if kl_in_reward and kl_coef:
        r -= kl_coef * core.kl_k1(t.old_logprobs, t.ref_logprobs)
    r[-1] += t.reward
    return r


def compute(transitions: Sequence[Transition], estimator: str, *, gamma: float, lam: float,
            kl_coef: float, kl_in_reward: bool) -> None:
    """Fill ``advantages`` and ``returns`` of every transition (not yet whitened)."""
    rewards = {id(t): token_rewards(t, kl_coef, kl_in_reward) for t in transitions}
    traces = by_trace(transitions)
    if estimator == "gae":
        for steps in traces:
            adv, ret = core.chained_gae([rewards[id(t)] for t in steps],
                                        [_values(t) for t in steps], gamma, lam)
            for t, a, r in zip(steps, adv, ret):
                t.advantages, t.returns = a, r
    elif estimator == "per-step":
        for t in transitions:
            t.advantages, t.returns = core.gae(rewards[id(t)], _values(t), gamma, lam)
    elif estimator == "grpo":
        trace_returns = torch.tensor([float(sum(rewards[id(t)].sum() for t in steps))
                                      for steps in traces])
        mean, std = core.group_advantages(trace_returns, [steps[0].group for steps in traces])
        for i, steps in enumerate(traces):
            a = (float(trace_returns[i]) - float(mean[i])) / float(std[i])
            for t in steps:
                t.advantages = torch.full((len(t.response_ids),), a)
                t.returns = torch.full((len(t.response_ids),), float(trace_returns[i]))
    else:
        raise ValueError(f"unknown estimator {estimator!r}")


def _values(t: Transition) -> torch.Tensor:
    assert t.values is not None
    return t.values


def whiten_stats(transitions: Sequence[Transition]) -> tuple[float, float, float]:
    """``(sum, sum of squares, count)`` of all advantage tokens (summed across processes by
    the caller, so whitening is over the global batch)."""
    s = sq = n = 0.0
    for t in transitions:
        assert t.advantages is not None
        s += float(t.advantages.sum())
        sq += float((t.advantages ** 2).sum())
        n += t.advantages.numel()
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
