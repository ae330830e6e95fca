"""Faster fp32 linear layers for decoding on CPU.

``F.linear(x, W)`` computes ``x @ W.T``, and for inputs of a few rows MKL picks a slow kernel
for that layout. Computing the same product as ``(W @ x.T).T`` (made contiguous again, or the
layers after it slow down more than the product gained) is faster for up to ~128 rows.
Measured on SmolLM2-135M on the 2-core box, whole-model forward, median, ``rows`` being
sequences x new tokens (``benchmarks/llm_throughput.py --steps-only --linear``):

- decode steps: 2 rows 79 -> 45 ms, 4 rows 85 -> 48 ms, 8 rows 102 -> 76 ms, 16 rows 122 ->
  97 ms; one row unchanged (49 / 50 ms);
- prefills: 1 x 32 tokens 124 -> 101 ms, 4 x 32 tokens 290 -> 253 ms.

Beyond ~128 rows ``F.linear`` was faster in a one-off comparison routing every layer through
``(W @ x.T).T`` (8 x 80 tokens: 1290 against 1438 ms), so longer inputs keep it.

``use_fast_linears(model)`` switches the class of the model's plain ``nn.Linear`` modules to
``FastLinear``, a subclass whose forward takes that route only on CPU, in fp32, for at most
``MAX_ROWS`` rows, outside autograd and outside autocast; otherwise it is
``nn.Linear.forward``. Weights, state dicts, ``isinstance`` checks and training are unchanged.
Quantised subclasses of ``nn.Linear`` (bitsandbytes and the like) are left alone.
"""

from __future__ import annotations

import torch
from torch import nn

MAX_ROWS = 128  # up to this many rows (flattened leading dimensions) take the W @ x.T route


def linear_wt(x: torch.Tensor, weight: torch.Tensor,
              bias: torch.Tensor | None = None) -> torch.Tensor:
    """``F.linear(x, weight, bias)`` computed as ``(weight @ x.T).T`` over the flattened rows,
    returned contiguous like ``F.linear``'s result."""
    rows = x.reshape(-1, x.shape[-1])
    out = torch.mm(weight, rows.t()).t().contiguous()
    if bias is not None:
        out = out + bias
    return out.reshape(*x.shape[:-1], weight.shape[0])


class FastLinear(nn.Linear):
    """``nn.Linear`` computing CPU fp32 inference products of <= ``MAX_ROWS`` rows as
    ``(W @ x.T).T``."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        w = self.weight
        if (x.device.type == "cpu" and x.dtype == torch.float32 and w.dtype == torch.float32
                and not torch.is_grad_enabled() and not torch.is_autocast_enabled("cpu")
                and x.numel() <= MAX_ROWS * x.shape[-1]):
            return linear_wt(x, w, self.bias)
        return super().forward(x)


def use_fast_linears(model: nn.Module) -> int:
    """Give every plain ``nn.Linear`` of ``model`` the ``FastLinear`` forward; how many."""
    n = 0
    for module in model.modules():
        if type(module) is nn.Linear:
            module.__class__ = FastLinear
            n += 1
    return n
