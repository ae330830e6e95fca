"""Decoder passes on CUDA without cuDNN's scaled-dot-product attention.

cuDNN's attention (PyTorch's first choice for bfloat16 on recent GPUs) builds a kernel plan
for every new input shape, and a growing KV cache gives every decoding step a new width. On an
H200 (torch 2.11, bfloat16, a random model of Qwen2.5-0.5B's shape, 32 rows 16 at a time,
greedy) a fresh process's decoding took 52.9 ms a step with cuDNN and 18.3 without (17.4 and
18.4 once every shape had been seen); with cuDNN two greedy passes of one process chose the
same tokens on 3 of 32 rows, without it on 32 (docs/results/gpu-check, 2026-11-29).

``without_cudnn_attention(device)`` turns only cuDNN's backend off while any such pass runs and
puts the setting back when the last one ends; the other backends stay as the user set them.
The flag is process-wide (PyTorch keeps one for all threads), so attention elsewhere in the
process (a trainer in another thread) also goes without cuDNN during those passes. Passes of
several decoders in different threads may overlap: a count, not a saved-and-restored flag per
pass, decides when the setting is put back. On a CPU, or a torch without the switch, it does
nothing.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

import torch

_lock = threading.Lock()
_active = 0  # passes running without cuDNN attention
_before: bool | None = None  # the setting the first of them found


@contextlib.contextmanager
def _off() -> Iterator[None]:
    global _active, _before
    cuda = torch.backends.cuda
    with _lock:
        if _active == 0:
            _before = cuda.cudnn_sdp_enabled()
            cuda.enable_cudnn_sdp(False)
        _active += 1
    try:
        yield
    finally:
        with _lock:
            _active -= 1
            if _active == 0 and _before is not None:
                cuda.enable_cudnn_sdp(_before)
                _before = None


def without_cudnn_attention(device: torch.device) -> contextlib.AbstractContextManager[None]:
    """A context for one forward pass on ``device`` (module docstring)."""
    cuda = torch.backends.cuda
    if device.type != "cuda" or not (hasattr(cuda, "enable_cudnn_sdp")
                                     and hasattr(cuda, "cudnn_sdp_enabled")):
        return contextlib.nullcontext()
    return _off()
