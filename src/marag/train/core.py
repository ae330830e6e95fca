"""The algorithms, as pure torch functions: advantages, PPO/GRPO losses, KL.

No I/O and no model here. Shapes: ``B`` transitions (one trainable LLM step each) and ``T``
response tokens, right-aligned in a ``[B, T]`` matrix with ``mask`` 1 on real tokens. A
*sequence* below is what one advantage estimator walks over: for ``gae`` the concatenated
response tokens of one trace's trainable steps, in the order the steps ran.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch


def masked_mean(x: torch.Tensor, mask: torch.Tensor, denom: float | torch.Tensor | None = None
                ) -> torch.Tensor:
    """Sum of ``x`` over ``mask`` divided by ``denom`` (default: the number of masked-in
    entries). A fixed ``denom`` (the token count of the whole global mini-batch) makes
    gradient accumulation and data-parallel averaging equal to one big batch."""
    # where, not a product: a masked-out entry may be inf or NaN (a pad token outside the
    # allowed tokens of restricted decoding has logprob -inf)
    total = torch.where(mask.bool(), x, torch.zeros_like(x)).sum()
    if denom is None:
        denom = mask.sum().clamp(min=1)
    return total / denom


def gae(rewards: torch.Tensor, values: torch.Tensor, gamma: float, lam: float
        ) -> tuple[torch.Tensor, torch.Tensor]:
    """Generalised advantage estimation over one sequence of ``n`` tokens.

    ``rewards[t]`` is the reward received after token ``t``; ``values[t]`` the critic's
    estimate before it. The value after the last token is 0 (the episode ends). Returns
    ``(advantages, returns)``, both ``[n]``, with ``returns = advantages + values``.
    """
    n = rewards.shape[0]
    adv = torch.zeros_like(rewards)
    last = rewards.new_zeros(())
    for t in range(n - 1, -1, -1):
        nxt = values[t + 1] if t + 1 < n else rewards.new_zeros(())
        delta = rewards[t] + gamma * nxt - values[t]
        last = delta + gamma * lam * last
        adv[t] = last
    return adv, adv + values


def chained_gae(rewards: Sequence[torch.Tensor], values: Sequence[torch.Tensor], gamma: float,
                lam: float) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """GAE over one trace's trainable steps laid end to end (JADE Algorithm 2, line 13).

    ``rewards[k]``/``values[k]`` are step ``k``'s per-token tensors. The last token of step
    ``k`` bootstraps from the first value of step ``k+1``, so a reward that arrives only at
    the final answer flows back into the planner's tokens. Returns per-step advantages and
    returns, split back to the steps' lengths.
    """
    lengths = [int(r.shape[0]) for r in rewards]
    adv, ret = gae(torch.cat(list(rewards)), torch.cat(list(values)), gamma, lam)
    return list(adv.split(lengths)), list(ret.split(lengths))


def group_advantages(returns: torch.Tensor, groups: Sequence[int] | torch.Tensor,
                     eps: float = 1e-6) -> tuple[torch.Tensor, torch.Tensor]:
    """GRPO's baseline: the mean and std of the *trace* returns of each group (the samples
    of one question). Returns ``(mean, std)`` per element of ``returns`` ([n] each); a group
    of one gets mean = its return and std = 1 (zero advantage, no division blow-up)."""
    g = torch.as_tensor(groups)
    mean = torch.empty_like(returns)
    std = torch.empty_like(returns)
    for key in torch.unique(g):
        idx = g == key
        vals = returns[idx]
        mean[idx] = vals.mean()
        std[idx] = vals.std(unbiased=False) + eps if vals.numel() > 1 else 1.0
    return mean, std


def kl_k1(logp: torch.Tensor, ref_logp: torch.Tensor) -> torch.Tensor:
    """Per-token estimate ``log pi - log ref`` (its expectation is KL(pi || ref))."""
    return logp - ref_logp


def kl_k3(logp: torch.Tensor, ref_logp: torch.Tensor) -> torch.Tensor:
    """Per-token ``exp(r) - r - 1`` with ``r = log ref - log pi``: unbiased and >= 0."""
    r = ref_logp - logp
    return torch.exp(r) - r - 1.0


def policy_loss(logp: torch.Tensor, old_logp: torch.Tensor, adv: torch.Tensor,
                mask: torch.Tensor, clip: float, denom: float | torch.Tensor | None = None
                ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Clipped surrogate ``-min(rho A, clip(rho, 1-eps, 1+eps) A)``, token-averaged.

    Returns the loss and statistics: ``clipfrac`` (share of tokens where the clipped term
    was the smaller one) and ``approx_kl`` (mean of ``old - new`` logprob, k1 to the rollout
    policy).
    """
    ratio = torch.exp(logp - old_logp)
    unclipped = -adv * ratio
    clipped = -adv * torch.clamp(ratio, 1.0 - clip, 1.0 + clip)
    loss = masked_mean(torch.maximum(unclipped, clipped), mask, denom)
    with torch.no_grad():
        stats = {
            "clipfrac": masked_mean((clipped > unclipped).float(), mask),
            "approx_kl": masked_mean(old_logp - logp, mask),
            "ratio": masked_mean(ratio, mask),
        }
    return loss, stats


def value_loss(values: torch.Tensor, old_values: torch.Tensor, returns: torch.Tensor,
               mask: torch.Tensor, clip: float, denom: float | torch.Tensor | None = None
               ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Clipped value loss ``0.5 max((v - R)^2, (v_clip - R)^2)`` with ``v_clip`` kept within
    ``clip`` of the rollout-time value."""
    v_clip = old_values + torch.clamp(values - old_values, -clip, clip)
    loss = 0.5 * masked_mean(torch.maximum((values - returns) ** 2, (v_clip - returns) ** 2),
                             mask, denom)
    with torch.no_grad():
        stats = {"vf_clipfrac": masked_mean(((values - old_values).abs() > clip).float(), mask)}
    return loss, stats


class AdaptiveKL:
    """The KL coefficient controller of Ziegler et al. (2019): move the coefficient so the
    observed KL tracks ``target``, by at most 20% of ``n / horizon`` per update. With no
    target the coefficient stays fixed."""

    def __init__(self, coef: float, target: float | None, horizon: int) -> None:
        self.coef = coef
        self.target = target
        self.horizon = horizon

    def update(self, kl: float, n: int) -> float:
        if self.target is not None:
            err = max(-0.2, min(0.2, kl / self.target - 1.0))
            self.coef *= 1.0 + err * n / self.horizon
        return self.coef
