"""Which floating-point type a local model runs in when its config says ``dtype: auto``.

For inference on a CPU with native bfloat16 matrix units (AMX tiles, or AVX-512 BF16) the
135M SmolLM2 prefills ~3x and decodes ~1.8x faster in bfloat16 than in float32 (measured on
the dev box's Xeon, see BENCHMARKS.md), so ``auto`` picks bfloat16 there; a CPU without them
emulates bfloat16 and is faster in float32. On CUDA ``auto`` is bfloat16 where the GPU
supports it, else float32.

Training keeps float32 on CPU: the trainer's gradients and optimizer state would lose
precision in bfloat16, and its reference logprobs must match what it trains. Callers say
which purpose they load for; nothing else changes the rule.
"""

from __future__ import annotations

from typing import Literal

Purpose = Literal["inference", "training"]
DTYPES = ("float32", "bfloat16", "float16")


def cpu_has_native_bf16() -> bool:
    """Whether this CPU multiplies bfloat16 matrices in hardware (AMX or AVX-512 BF16)."""
    import torch

    cpu = getattr(torch, "cpu", None)
    for probe in ("_is_amx_tile_supported", "_is_avx512_bf16_supported"):
        check = getattr(cpu, probe, None)
        try:
            if check is not None and check():
                return True
        except RuntimeError:  # a torch build without the cpuinfo probes
            continue
    return False


def cuda_has_bf16() -> bool:
    import torch

    return bool(torch.cuda.is_available() and torch.cuda.is_bf16_supported())


def resolve_dtype(dtype: str, device: str, purpose: Purpose = "inference") -> str:
    """The concrete dtype name (``float32``/``bfloat16``/``float16``) for ``dtype`` on
    ``device``; anything but ``auto`` is returned as given."""
    if dtype != "auto":
        return dtype
    kind = device.split(":", 1)[0]
    if kind == "cuda":
        return "bfloat16" if cuda_has_bf16() else "float32"
    if kind == "cpu" and purpose == "inference" and cpu_has_native_bf16():
        return "bfloat16"
    return "float32"
