"""Wall-clock seconds, and on a GPU the peak memory, per named phase of a training
iteration."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager


class Phases:
    """``with phases("update"): ...`` adds the block's seconds to ``seconds["update"]``; with
    ``cuda`` True also the most GPU memory PyTorch held during the block (GiB, the peak of
    ``torch.cuda.max_memory_allocated`` after a reset at the block's start) to
    ``peak_gib["update"]`` (the larger when a phase runs twice)."""

    def __init__(self, cuda: bool = False) -> None:
        self.seconds: dict[str, float] = {}
        self.peak_gib: dict[str, float] = {}
        self.cuda = cuda

    @contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        if self.cuda:
            import torch

            torch.cuda.reset_peak_memory_stats()
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - t0
            if self.cuda:
                import torch

                peak = torch.cuda.max_memory_allocated() / 2**30
                self.peak_gib[name] = max(peak, self.peak_gib.get(name, 0.0))
