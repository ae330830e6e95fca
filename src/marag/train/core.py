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


def turn_gae(rewards: torch.Tensor, values: torch.Tensor, gamma: float, lam: float
             ) -> tuple[torch.Tensor, torch.Tensor]:
    """GAE over the *steps* of one trace: one reward and one value per step.

    ``rewards[k]`` is what step ``k`` earned (its scalar reward, KL penalty included when it
    goes into the reward), ``values[k]`` the critic's estimate at the step's last prompt
    token, before it answered. ``delta_k = r_k + gamma V_{k+1} - V_k`` with ``V_K = 0``; the
    discount runs per step, not per token, so a reward at the final answer reaches the
    planner undiminished by the length of the replies between them (with gamma = lam = 1 a
    step's advantage is the sum of its own and every later step's reward minus its value).
    Returns ``(advantages, returns)``, both ``[K]``; the trainer puts step ``k``'s advantage on
    all of its tokens."""
    return gae(rewards, values, gamma, lam)


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


def leave_one_out(returns: torch.Tensor, groups: Sequence[int] | torch.Tensor
                  ) -> torch.Tensor:
    """RLOO's baseline: for each element, the mean return of the *other* samples of its
    group (a group of one gets its own return: zero advantage)."""
    g = torch.as_tensor(groups)
    base = torch.empty_like(returns)
    for key in torch.unique(g):
        idx = g == key
        vals = returns[idx]
        n = vals.numel()
        base[idx] = (vals.sum() - vals) / (n - 1) if n > 1 else vals
    return base


def explained_variance(values: torch.Tensor, returns: torch.Tensor) -> float:
    """``1 - Var(returns - values) / Var(returns)``: 1 for a perfect critic, 0 for one no
    better than the mean, below 0 for one worse than predicting the mean (its advantages
    are then noisier than none). NaN when the returns do not vary: returns rebuilt as
    ``advantages + values`` in float32 keep rounding noise (~1e-7 of the values) when every
    reward of the batch is equal, and dividing by its variance gave -5.8e14 in a run."""
    if not returns.numel():
        return float("nan")
    var = float(returns.double().var(unbiased=False))
    if var <= 1e-10 * (1.0 + float(values.double().pow(2).mean())):
        return float("nan")
    return 1.0 - float((returns - values).var(unbiased=False)) / var


def kl_k1(logp: torch.Tensor, ref_logp: torch.Tensor) -> torch.Tensor:
    """Per-token estimate ``log pi - log ref`` (its expectation is KL(pi || ref))."""
    return logp - ref_logp


# k3's log-ratio and value are clamped (as verl does): one token the reference finds nearly
# impossible would otherwise overflow exp() and dominate the loss and the logged KL
K3_LOG_RATIO_MAX = 20.0
K3_MAX = 10.0
# the PPO log-ratio is clamped before exp() for the same reason
LOG_RATIO_MAX = 20.0


def kl_k3(logp: torch.Tensor, ref_logp: torch.Tensor) -> torch.Tensor:
    """Per-token ``exp(r) - r - 1`` with ``r = log ref - log pi``: unbiased and >= 0.
    ``r`` is clamped to +-20 and the result to at most 10."""
    r = torch.clamp(ref_logp - logp, -K3_LOG_RATIO_MAX, K3_LOG_RATIO_MAX)
    return torch.clamp(torch.exp(r) - r - 1.0, max=K3_MAX)


def aggregate(x: torch.Tensor, mask: torch.Tensor, mode: str,
              denom: float | torch.Tensor | None = None, norm_tokens: int = 1) -> torch.Tensor:
    """Reduce per-token losses ``x`` [B, T] to a scalar.

    * ``token-mean``: every token of the batch weighs the same (a 128-token reply counts 128
      times a 6-token plan); ``denom`` is the global token count.
    * ``seq-mean-token-mean``: each sequence's token mean, then the mean over sequences, so
      every step weighs the same whatever its length; ``denom`` is the global sequence count.
    * ``seq-mean-token-sum-norm``: each sequence's token *sum* divided by the constant
      ``norm_tokens``, then the mean over sequences (Dr. GRPO: no per-length normalisation,
      so a long wrong answer is not penalised less per token than a short one); ``denom``
      is the global sequence count.
    """
    if mode == "token-mean":
        return masked_mean(x, mask, denom)
    if mode == "seq-mean-token-sum-norm":
        total = torch.where(mask.bool(), x, torch.zeros_like(x)).sum() / float(norm_tokens)
        if denom is None:
            denom = (mask.sum(-1) > 0).sum().clamp(min=1)
        return total / denom
    if mode == "seq-mean-token-mean":
        m = mask.bool()
        per_seq = torch.where(m, x, torch.zeros_like(x)).sum(-1) / mask.sum(-1).clamp(min=1)
        has = (mask.sum(-1) > 0).to(x.dtype)
        if denom is None:
            denom = has.sum().clamp(min=1)
        return (per_seq * has).sum() / denom
    raise ValueError(f"unknown loss aggregation {mode!r}")


def policy_loss(logp: torch.Tensor, old_logp: torch.Tensor, adv: torch.Tensor,
                mask: torch.Tensor, clip: float, denom: float | torch.Tensor | None = None,
                *, clip_ratio_c: float | None = None, agg: str = "token-mean",
                clip_high: float | None = None, norm_tokens: int = 1,
                ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Clipped surrogate ``-min(rho A, clip(rho, 1-eps, 1+eps_high) A)``, aggregated by ``agg``.

    ``clip_high`` (None: ``clip``) is DAPO's decoupled upper bound: a larger one lets a
    token whose probability was low rise further before the clip holds it (clip-higher).

    The log-ratio is clamped to +-20 before ``exp``. ``clip_ratio_c`` (> 1) is the dual clip
    of Ye et al. (2020): for negative advantages the loss is at most ``-A * c``, so one token
    whose probability rose far above the rollout's cannot dominate the batch.

    Returns the loss and statistics: ``clipfrac`` (share of tokens where the clipped term
    was the smaller one), ``clipfrac_c`` (tokens held by the dual clip), ``approx_kl`` (mean
    of ``old - new`` logprob, k1 to the rollout policy) and the mean ratio.
    """
    log_ratio = torch.clamp(logp - old_logp, -LOG_RATIO_MAX, LOG_RATIO_MAX)
    ratio = torch.exp(log_ratio)
    unclipped = -adv * ratio
    clipped = -adv * torch.clamp(ratio, 1.0 - clip, 1.0 + (clip if clip_high is None
                                                           else clip_high))
    per_token = torch.maximum(unclipped, clipped)
    held = torch.zeros_like(per_token, dtype=torch.bool)
    if clip_ratio_c is not None:
        if clip_ratio_c <= 1.0:
            raise ValueError(f"clip_ratio_c must be > 1, got {clip_ratio_c}")
        cap = -adv * clip_ratio_c
        held = (adv < 0) & (per_token > cap)
        per_token = torch.where(adv < 0, torch.minimum(per_token, cap), per_token)
    loss = aggregate(per_token, mask, agg, denom, norm_tokens)
    with torch.no_grad():
        stats = {
            "clipfrac": masked_mean((clipped > unclipped).float(), mask),
            "clipfrac_c": masked_mean(held.float(), mask),
            "approx_kl": masked_mean(old_logp - logp, mask),
            "ratio": masked_mean(ratio, mask),
        }
    return loss, stats


def value_loss(values: torch.Tensor, old_values: torch.Tensor, returns: torch.Tensor,
               mask: torch.Tensor, clip: float | None, denom: float | torch.Tensor | None = None,
               *, agg: str = "token-mean") -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Clipped value loss ``0.5 max((v - R)^2, (v_clip - R)^2)`` with ``v_clip`` kept within
    ``clip`` of the rollout-time value (``clip`` None: the plain squared error)."""
    if clip is None:
        per_token = (values - returns) ** 2
        clip = float("inf")
    else:
        v_clip = old_values + torch.clamp(values - old_values, -clip, clip)
        per_token = torch.maximum((values - returns) ** 2, (v_clip - returns) ** 2)
    loss = 0.5 * aggregate(per_token, mask, agg, denom)
    with torch.no_grad():
        stats = {"vf_clipfrac": masked_mean(((values - old_values).abs() > clip).float(), mask)}
    return loss, stats


def entropy(logp: torch.Tensor) -> torch.Tensor:
    """Entropy of the distribution with log-probabilities ``logp`` (over the last axis), safe
    where an entry is ``-inf`` (a token outside the allowed set of restricted decoding):
    those entries contribute 0 to the value *and* to the gradient (``entr(p)`` has an
    infinite derivative at p = 0, and ``p * log p`` a NaN one)."""
    p = logp.exp()
    finite = torch.isfinite(logp)
    return -(p * logp.masked_fill(~finite, 0.0)).sum(-1)


class AdaptiveKL:
    """The KL coefficient controller of Ziegler et al. (2019): after each batch of ``n``
    *sequences* (the trained steps of an iteration, as verl counts them) the coefficient is
    multiplied by ``1 + clip(kl / target - 1, -0.2, 0.2) * n / horizon``. Near the target the
    error then shrinks by a factor e every ``horizon`` sequences. With no target the
    coefficient stays fixed."""

    def __init__(self, coef: float, target: float | None, horizon: int, *,
                 low: float = 0.0, high: float | None = None) -> None:
        self.coef = coef
        self.target = target
        self.horizon = horizon
        self.low, self.high = low, high  # the coefficient stays within [low, high]

    def update(self, kl: float, n: int) -> float:
        if self.target is not None:
            err = max(-0.2, min(0.2, kl / self.target - 1.0))
            self.coef = max(self.low, self.coef * (1.0 + err * n / self.horizon))
            if self.high is not None:
                self.coef = min(self.high, self.coef)
        return self.coef
