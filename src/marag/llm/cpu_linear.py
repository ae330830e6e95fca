"""Faster fp32 linear layers for few-row decoding on CPU.

``F.linear(x, W)`` computes ``x @ W.T``, and for the few-row inputs of a decode step MKL picks
a slow kernel for that layout. Computing the same product as ``(W @ x.T).T`` is much faster
in two cases, measured on SmolLM2-135M on the 2-core box (median decode step, whole model):

- up to 4 rows, every layer: 2 rows 94 -> 63 ms, 4 rows 103 -> 70 ms. From 6 rows on,
  ``F.linear`` is as fast or faster, so it is kept there.
- the output projection (a tall 49k x 576 weight) at any row count up to 32: 8 rows 21 -> 9 ms.

``use_fast_linears(model)`` switches the class of the model's plain ``nn.Linear`` modules to
``FastLinear``, a subclass whose forward takes that route only on CPU, in fp32, outside
autograd and outside autocast; otherwise it is ``nn.Linear.forward``. Weights, state dicts,
``isinstance`` checks and training are unchanged. Quantised subclasses of ``nn.Linear``
(bitsandbytes and the like) are left alone.
"""

from __future__ import annotations

import torch
from torch import nn

SMALL_ROWS = 4  # up to this many rows every layer takes the W @ x.T route
TALL = 8  # a weight with out >= TALL x in features (an output projection) always takes it


def linear_wt(x: torch.Tensor, weight: torch.Tensor,
              bias: torch.Tensor | None = None) -> torch.Tensor:
    """``F.linear(x, weight, bias)`` computed as ``(weight @ x.T).T`` over the flattened rows."""
    rows = x.reshape(-1, x.shape[-1])
    out = torch.mm(weight, rows.t()).t()
    if bias is not None:
        out = out + bias
    return out.reshape(*x.shape[:-1], weight.shape[0])


class FastLinear(nn.Linear):
    """``nn.Linear`` that computes few-row CPU fp32 inference products as ``(W @ x.T).T``."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        w = self.weight
        if (x.device.type == "cpu" and x.dtype == torch.float32 and w.dtype == torch.float32
                and not torch.is_grad_enabled() and not torch.is_autocast_enabled("cpu")
                and (x.numel() <= SMALL_ROWS * x.shape[-1] or w.shape[0] >= TALL * w.shape[1])):
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
