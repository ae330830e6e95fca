"""The PPO learner: the policy module, its optimizer and schedule, scoring, the loss and the
update. It knows transitions, not traces: rollouts, rewards and server sync live in
``trainer.py``, so the learner is tested on hand-made transitions.

Three handles on the same weights, kept apart on purpose:

* ``policy``: the bare :class:`PolicyValue` (adapter, value head), for saving, loading and
  naming parameters;
* ``module``: what ``accelerate.prepare`` returned (DDP or FSDP2 around ``policy``), for
  every forward pass that is followed by a backward pass;
* ``scorer``: the module for no-grad scoring: the bare ``policy`` under DDP (whose forward
  would sync buffers with peers running a different number of forwards), the sharded one
  under FSDP (the only one that can gather the parameters).
"""

from __future__ import annotations

import logging
import math
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any

import torch

from marag.config import TrainConfig
from marag.train import core
from marag.train.advantages import CRITIC_FREE
from marag.train.errors import TrainError
from marag.train.experience import Batch, Transition, batch, right_aligned, shared_batch
from marag.train.policy import PolicyValue, ReferenceLM, token_stats, trainable_parameters
from marag.train.step import (
    LossFn,
    Precision,
    compute_dtype,
    micro_batch_loss,
    micro_batch_step,
)

log = logging.getLogger(__name__)


class LearnerError(TrainError):
    """Training cannot go on (e.g. too many updates in a row had non-finite gradients)."""


def frozen_storage_dtype(setting: str, device: torch.device, lora: bool,
                         sharded: str) -> torch.dtype | None:
    """The dtype to store LoRA's frozen linear weights in (``policy.store_frozen_linears``),
    or None to keep them as loaded: bfloat16 when every pass over them computes in bf16
    autocast. On the CPU that includes the local decoder; on a GPU the decoder runs without
    autocast, so weights loaded in float32 must stay float32 there. A sharded run keeps them
    as loaded (FSDP2 shards parameters of one dtype)."""
    if not lora or sharded or device.type != "cpu":
        return None
    return torch.bfloat16 if compute_dtype(setting, device) == torch.bfloat16 else None


class Learner:
    def __init__(self, policy: PolicyValue, cfg: TrainConfig, acc: Any, *,
                 reference: torch.nn.Module | None, pad_id: int, eos_ids: Sequence[int],
                 allowed: Callable[[Transition], torch.Tensor | None], sharded: str = "",
                 uses_kl: bool = True) -> None:
        """``reference``: a frozen copy of the starting weights (full fine-tuning) or None
        (LoRA: the reference is the backbone with the adapter off). ``allowed(t)``: the
        vocabulary mask transition ``t`` was decoded with. ``uses_kl``: whether anything
        reads the reference logprobs (no reference pass otherwise)."""
        self.cfg = cfg
        self.acc = acc
        self.policy = policy
        self.sharded = sharded
        self.pad_id = pad_id
        self.eos_ids = list(eos_ids)
        self.allowed = allowed
        self.uses_kl = uses_kl
        self.reference = ReferenceLM(reference).eval() if reference is not None else None
        groups = [{"params": trainable_parameters(policy.backbone), "lr": cfg.lr},
                  {"params": list(policy.value_head.parameters()), "lr": cfg.critic_lr}]
        optimizer = torch.optim.AdamW(groups, weight_decay=cfg.weight_decay)
        self.module, self.optimizer = acc.prepare(policy, optimizer)
        # after prepare: FSDP2 replaces the parameters with sharded ones
        self.policy_params = trainable_parameters(policy.backbone)
        self.value_params = list(policy.value_head.parameters())
        self.scorer = self.module if sharded else policy
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, self._lr_factor)
        self.precision = Precision.of(cfg.dtype, acc.device)
        self.dtype = self.precision.dtype
        self.pad_multiple = self.precision.pad_multiple
        self.skipped_in_a_row = 0
        self.kl_coef = cfg.kl_coef  # the trainer sets the controller's value before updates
        # train.critic_warmup: the trainer sets it for the warm-up iterations; the update
        # then trains the value head alone (policy terms x 0, the policy's gradients dropped
        # before the optimizer step, so Adam neither moves nor counts them)
        self.actor_frozen = False

    # ------------------------------------------------------------------ set-up

    def _lr_factor(self, it: int) -> float:
        """Linear warm-up over ``warmup_iterations``, then constant or cosine decay to 10% at
        ``iterations``."""
        cfg = self.cfg
        warm = cfg.warmup_iterations
        if warm and it < warm:
            return (it + 1) / warm
        if cfg.lr_schedule == "cosine":
            span = max(1, cfg.iterations - warm)
            done = min(1.0, (it - warm) / span)
            return 0.1 + 0.9 * 0.5 * (1.0 + math.cos(math.pi * done))
        return 1.0

    def reschedule(self) -> None:
        """Set each parameter group's learning rate from this config's schedule at the
        scheduler's step: a resumed optimizer carries the rate the saved run's schedule gave,
        which differs when the run is extended (``train.iterations`` is its cosine horizon)."""
        factor = self._lr_factor(self.scheduler.last_epoch)
        for group, base in zip(self.optimizer.param_groups, self.scheduler.base_lrs):
            group["lr"] = base * factor

    def autocast(self) -> AbstractContextManager[Any]:
        return self.precision.autocast()

    def _batch(self, items: Sequence[Transition]) -> Batch:
        make = shared_batch if self.cfg.share_prompts else batch
        return make(items, self.pad_id, self.acc.device, multiple=self.pad_multiple)

    def _sorted(self, items: Sequence[Transition]) -> list[Transition]:
        """Micro-batch order: by length, or, sharing prompts, by prompt so rows with one
        prompt sit together."""
        if self.cfg.share_prompts:
            return sorted(items, key=lambda t: (len(t.prompt_ids), t.prompt_ids))
        return sorted(items, key=lambda t: t.length)

    def _shuffled(self, transitions: list[Transition], g: torch.Generator) -> list[Transition]:
        """The epoch's order: transitions shuffled, or, sharing prompts, groups of one prompt
        shuffled (each group kept whole, so its rows can share one pass)."""
        if not self.cfg.share_prompts:
            return [transitions[i] for i in torch.randperm(len(transitions), generator=g)]
        groups: dict[tuple[int, ...], list[Transition]] = {}
        for t in transitions:
            groups.setdefault(tuple(t.prompt_ids), []).append(t)
        listed = list(groups.values())
        return [t for i in torch.randperm(len(listed), generator=g) for t in listed[i]]

    # ------------------------------------------------------------------ scoring

    @torch.no_grad()
    def score(self, transitions: list[Transition], *, values: bool = True,
              old: bool = True) -> None:
        """Fill old logprobs and values (current weights) and reference logprobs (adapter
        off, or the frozen copy) of ``transitions``, in length-sorted micro-batches of
        ``score_micro_batch_size``. ``old`` False keeps the rollout's own logprobs as the old
        ones (exact when the rollout ran these weights in this dtype); with neither values,
        old logprobs nor KL wanted, nothing runs."""
        if not old:
            for t in transitions:
                t.old_logprobs = torch.tensor(t.rollout_logprobs, dtype=torch.float32)
        need_policy = values or old
        if not (need_policy or self.uses_kl):
            return
        self.module.eval()
        micro = list(chunks(self._sorted(transitions), self.cfg.score_micro_batch_size))
        rounds = max(self._all_counts(len(micro))) if self.sharded else len(micro)
        for j in range(rounds):
            items = micro[j] if j < len(micro) else [self.dummy()]
            b = self._batch(items)
            allowed = [self.allowed(t) for t in items]
            with self.autocast():
                if need_policy:
                    logp, _, vals = token_stats(self.scorer, b, allowed, with_values=values)
                if self.uses_kl:
                    with self.reference_module() as ref_module:
                        ref_logp, _, _ = token_stats(ref_module, b, allowed, with_values=False)
            if j >= len(micro):
                continue  # a forward pass for the peers' parameter gathers only
            for i, t in enumerate(items):
                n = len(t.response_ids)
                if old:
                    t.old_logprobs = logp[i, -n:].float().cpu()
                if values:
                    assert vals is not None
                    t.values = vals[i, -n:].float().cpu()
                else:
                    t.values = torch.zeros(n)
                t.ref_logprobs = ref_logp[i, -n:].float().cpu() if self.uses_kl else None

    @contextmanager
    def reference_module(self) -> Iterator[torch.nn.Module]:
        if self.reference is None:
            with self.policy.backbone.disable_adapter():
                yield self.scorer
        else:
            yield self.reference

    # ------------------------------------------------------------------ update

    def update(self, transitions: list[Transition], order_seed: Callable[[int], int]
               ) -> dict[str, float]:
        """PPO epochs over shuffled mixed mini-batches of ``minibatch_size`` transitions (all
        processes), each split into length-sorted micro-batches whose losses carry the whole
        mini-batch's token (or sequence) count, so the split does not change the gradient.
        ``order_seed(epoch)`` seeds the shuffle. Returns mean statistics."""
        acc, cfg = self.acc, self.cfg
        world = acc.num_processes
        counts = self._all_counts(len(transitions))
        mb_local = max(1, math.ceil(cfg.minibatch_size / world))
        n_mb = max(1, math.ceil(max(counts) / mb_local)) if max(counts) else 0
        stats: Counter[str] = Counter()
        n_stat = 0
        steps = skipped = 0
        self.module.train()
        for epoch in range(cfg.ppo_epochs):
            g = torch.Generator().manual_seed(order_seed(epoch))
            order = self._shuffled(transitions, g)
            for m in range(n_mb):
                items = self._sorted(order[m * mb_local:(m + 1) * mb_local])
                totals = (self._all_sum(loss_units(items, cfg.loss_agg)),
                          self._all_sum(value_positions(items)))
                sizes = [max(0, min(mb_local, c - m * mb_local)) for c in counts]
                n_micro = max(math.ceil(s / cfg.micro_batch_size) for s in sizes)
                micro = list(chunks(items, cfg.micro_batch_size))
                for j in range(n_micro):
                    real = j < len(micro)
                    chunk = micro[j] if real else [self.dummy()]
                    with acc.no_sync(self.module) if j < n_micro - 1 else nullcontext():
                        b, allowed, loss_of = self._ppo(chunk, totals, world, real)
                        _, s = micro_batch_step(self.module, b, allowed, loss_of,
                                                self.precision, backward=acc.backward,
                                                entropy=True)
                    if real:
                        for k, v in s.items():
                            stats[k] += v * len(chunk)
                        n_stat += len(chunk)
                if self.actor_frozen:
                    for p in self.policy_params:
                        p.grad = None
                norms = self._clip()
                steps += 1
                if all(math.isfinite(v) for v in norms.values()):
                    self.optimizer.step()
                    self.skipped_in_a_row = 0
                    for k, v in norms.items():
                        stats[k] += v * max(1, len(items))
                else:
                    skipped += 1
                    self.skipped_in_a_row += 1
                    log.warning("update skipped: non-finite gradient norm (%s)", norms)
                self.optimizer.zero_grad(set_to_none=True)
                if self.skipped_in_a_row >= cfg.max_skipped_steps:
                    raise LearnerError(
                        f"{self.skipped_in_a_row} optimizer steps in a row had a non-finite "
                        f"gradient norm ({norms}); the weights were left as they were before "
                        "them. Lower train.lr, check the rewards for inf/NaN, or set "
                        "train.dtype: float32")
        if not self.actor_frozen:  # the schedule (warm-up, cosine) starts after the critic's
            self.scheduler.step()
        out = {k: v / max(1, n_stat) for k, v in stats.items()}
        out["skipped_steps"] = float(skipped)
        out["optimizer_steps"] = float(steps - skipped)
        return out

    def _clip(self) -> dict[str, float]:
        """Clip the policy's and the critic's gradients apart (the value loss would
        otherwise eat the policy's clip budget); returns the pre-clip norms."""
        out = {}
        for key, params, limit in (("grad_norm", self.policy_params, self.cfg.max_grad_norm),
                                   ("grad_norm.value", self.value_params,
                                    self.cfg.critic_max_grad_norm)):
            norm = self.acc.clip_grad_norm_(params, limit)
            if hasattr(norm, "full_tensor"):  # FSDP2: a replicated DTensor
                norm = norm.full_tensor()
            out[key] = float(norm)
        return out

    def loss(self, items: list[Transition], totals: tuple[float, float], world: int,
             real: bool) -> tuple[torch.Tensor, dict[str, float]]:
        """The PPO loss of one micro-batch (the forward pass, no backward). ``totals``: the
        global token (or sequence) count and the global count of value-loss positions of
        its mini-batch, which every micro-batch's policy and value losses are divided by;
        ``real`` False: a dummy that only takes part in the collective backward."""
        b, allowed, loss_of = self._ppo(items, totals, world, real)
        return micro_batch_loss(self.module, b, allowed, loss_of, entropy=True)

    def _ppo(self, items: list[Transition], totals: tuple[float, float], world: int,
             real: bool) -> tuple[Batch, list[torch.Tensor | None],
                                  LossFn[dict[str, float]]]:
        """The batch of ``items``, their allowed tokens and the PPO loss of their scores
        (see ``loss``)."""
        b = self._batch(items)
        allowed = [self.allowed(t) for t in items]

        def loss_of(logp: torch.Tensor, ent: torch.Tensor | None,
                    values: torch.Tensor | None) -> tuple[torch.Tensor, dict[str, float]]:
            return self._ppo_loss(items, b, logp, ent, values, totals, world, real)

        return b, allowed, loss_of

    def _ppo_loss(self, items: list[Transition], b: Batch, logp: torch.Tensor,
                  ent: torch.Tensor | None, values: torch.Tensor | None,
                  totals: tuple[float, float], world: int, real: bool
                  ) -> tuple[torch.Tensor, dict[str, float]]:
        cfg = self.cfg
        critic = cfg.estimator not in CRITIC_FREE and cfg.vf_coef > 0
        assert values is not None and ent is not None
        width = b.keep

        def cols(name: str) -> torch.Tensor:
            return right_aligned([getattr(t, name) for t in items], width).to(logp.device)

        mask = b.mask if real else torch.zeros_like(b.mask)
        # DDP averages gradients over processes: scale the global mean back up
        denom = max(totals[0], 1.0) / world
        agg = cfg.loss_agg
        old, advs = cols("old_logprobs"), cols("advantages")
        shape = {"clip_ratio_c": cfg.clip_ratio_c, "agg": agg, "clip_high": cfg.clip_high,
                 "norm_tokens": cfg.loss_norm_tokens}
        pg, pstats = core.policy_loss(logp, old, advs, mask, cfg.clip, denom, **shape)
        actor = 0.0 if self.actor_frozen else 1.0  # x 0 keeps the graph whole (DDP)
        loss = actor * pg
        out: dict[str, float] = {}
        with torch.no_grad():  # logged: this micro-batch's plain means
            out["pg_loss"] = float(core.policy_loss(logp, old, advs, b.mask, cfg.clip,
                                                    **shape)[0])
        out.update({k: float(v) for k, v in pstats.items()})
        if critic:
            vmask = right_aligned([t.value_mask if t.value_mask is not None
                                   else torch.ones(len(t.response_ids)) for t in items],
                                  width).to(logp.device)
            # a mean over the value positions (one per step for the turn-level estimators)
            v_denom = max(totals[1], 1.0) / world
            old_v, rets = cols("values"), cols("returns")
            vf, vstats = core.value_loss(values, old_v, rets, vmask * mask, cfg.value_clip,
                                         v_denom)
            loss = loss + cfg.vf_coef * vf
            with torch.no_grad():
                out["vf_loss"] = float(core.value_loss(values, old_v, rets, vmask * b.mask,
                                                       cfg.value_clip)[0])
            out.update({k: float(v) for k, v in vstats.items()})
        else:
            loss = loss + 0.0 * values.sum()  # keep the value head in the graph (DDP)
        if cfg.entropy_coef > 0:
            loss = loss - actor * cfg.entropy_coef * core.aggregate(ent, mask, agg, denom,
                                                                    cfg.loss_norm_tokens)
        out["entropy"] = float(core.masked_mean(ent.detach(), b.mask))
        if self.uses_kl:
            kl3 = core.kl_k3(logp, cols("ref_logprobs"))
            if cfg.kl_mode == "loss" and self.kl_coef > 0:
                loss = loss + actor * self.kl_coef * core.aggregate(kl3, mask, agg, denom,
                                                                    cfg.loss_norm_tokens)
            out["kl_k3"] = float(core.masked_mean(kl3.detach(), b.mask))
        return loss, out

    # ------------------------------------------------------------------ helpers

    def dummy(self) -> Transition:
        """A one-token transition that contributes zero loss: it lets a process with fewer
        transitions take part in every collective backward of its peers."""
        t = Transition(trace=-1, group=-1, order=0, role="", prompt_ids=[self.pad_id],
                       response_ids=[self.eos_ids[0] if self.eos_ids else self.pad_id],
                       rollout_logprobs=[0.0], temperature=1.0)
        z = torch.zeros(1)
        t.old_logprobs, t.ref_logprobs, t.values, t.advantages, t.returns = z, z, z, z, z
        return t

    def _all_counts(self, n: int) -> list[int]:
        t = torch.tensor([n], device=self.acc.device)
        return [int(x) for x in self.acc.gather(t).tolist()]

    def _all_sum(self, x: float) -> float:
        t = torch.tensor([x], dtype=torch.float64, device=self.acc.device)
        return float(self.acc.reduce(t, reduction="sum").item())


def loss_units(items: Sequence[Transition], agg: str) -> float:
    """What the policy loss of ``items`` is a mean over: tokens or sequences."""
    if agg == "token-mean":
        return float(sum(t.trained_tokens for t in items))
    return float(len(items))


def value_positions(items: Sequence[Transition]) -> float:
    return float(sum(t.trained_tokens if t.value_mask is None else float(t.value_mask.sum())
                     for t in items))


def chunks(items: Sequence[Transition], size: int) -> Iterator[list[Transition]]:
    for i in range(0, len(items), size):
        yield list(items[i:i + size])
