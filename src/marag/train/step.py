"""One definition, for ``marag train`` (the PPO learner) and ``marag sft``, of what a
training pass computes in and of one micro-batch's forward and backward pass.

* :class:`Precision`: the dtype the passes compute in (``train.dtype`` / ``sft.dtype``
  resolved on the device), the autocast that gives it, and the column multiple batches are
  padded to;
* :func:`micro_batch_loss`: the policy's per-token logprobs (entropies, values) of one
  padded micro-batch and the caller's loss of them (PPO's, or SFT's masked cross-entropy);
* :func:`micro_batch_step`: that under the precision's autocast, then the backward pass.

The LoRA-or-full choice of the trained module is ``policy.build_policy``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Any, TypeVar

import torch
from torch import nn

from marag.train.experience import Batch
from marag.train.policy import token_stats

# CPU bf16 kernels are fastest on widths that are multiples of this (as the decoder pads)
CPU_BF16_PAD = 32

S = TypeVar("S")
# (logprobs, entropies or None, values or None) [B, T] -> (loss, what the caller keeps)
LossFn = Callable[[torch.Tensor, torch.Tensor | None, torch.Tensor | None],
                  tuple[torch.Tensor, S]]


def compute_dtype(setting: str, device: torch.device) -> torch.dtype:
    """What ``train.dtype`` resolves to: the dtype scoring and updates compute in (weights
    and optimizer state stay as loaded). ``auto``: bfloat16 autocast where the hardware has
    bf16 matrix units (AMX / AVX-512 BF16 CPUs, bf16 GPUs), else float32."""
    from marag.llm.dtype import cpu_has_native_bf16, cuda_has_bf16

    if setting == "float32":
        return torch.float32
    if setting == "bfloat16":
        return torch.bfloat16
    native = cuda_has_bf16() if device.type == "cuda" else (
        device.type == "cpu" and cpu_has_native_bf16())
    return torch.bfloat16 if native else torch.float32


def pad_multiple(dtype: torch.dtype, device: torch.device) -> int:
    """The column multiple a training batch is padded to: CPU_BF16_PAD under CPU bf16."""
    return CPU_BF16_PAD if dtype == torch.bfloat16 and device.type == "cpu" else 1


@dataclass(frozen=True)
class Precision:
    """What every training pass on ``device`` computes in: ``dtype`` under autocast (none in
    float32), batches padded to a multiple of ``pad_multiple`` columns."""

    dtype: torch.dtype
    device: torch.device

    @classmethod
    def of(cls, setting: str, device: torch.device) -> Precision:
        """The precision of a ``dtype`` setting (``auto``, ``float32``, ``bfloat16``)."""
        return cls(compute_dtype(setting, device), device)

    @property
    def pad_multiple(self) -> int:
        return pad_multiple(self.dtype, self.device)

    def autocast(self) -> AbstractContextManager[Any]:
        if self.dtype == torch.float32:
            return nullcontext()
        return torch.autocast(self.device.type, dtype=self.dtype)


def micro_batch_loss(module: nn.Module, b: Batch, allowed: Sequence[torch.Tensor | None],
                     loss_of: LossFn[S], *, entropy: bool = False, with_values: bool = True
                     ) -> tuple[torch.Tensor, S]:
    """The forward pass of one micro-batch: ``module`` (a ``PolicyValue``, possibly wrapped
    by accelerate) scores ``b``'s response tokens under each row's ``allowed`` tokens, and
    ``loss_of(logp, entropy, values)`` turns them into the loss (``b.mask`` marks the tokens
    that count)."""
    logp, ent, values = token_stats(module, b, list(allowed), entropy=entropy,
                                    with_values=with_values)
    return loss_of(logp, ent, values)


def micro_batch_step(module: nn.Module, b: Batch, allowed: Sequence[torch.Tensor | None],
                     loss_of: LossFn[S], precision: Precision, *,
                     backward: Callable[[torch.Tensor], Any] | None = None,
                     entropy: bool = False, with_values: bool = True
                     ) -> tuple[torch.Tensor, S]:
    """:func:`micro_batch_loss` under ``precision``'s autocast, then the backward pass
    (``backward(loss)``: accelerate's, which scales and syncs, or ``loss.backward()``).
    Returns the loss, detached, and what ``loss_of`` kept."""
    with precision.autocast():
        loss, kept = micro_batch_loss(module, b, allowed, loss_of, entropy=entropy,
                                      with_values=with_values)
    if backward is None:
        loss.backward()
    else:
        backward(loss)
    return loss.detach(), kept
