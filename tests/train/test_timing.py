"""Phases: seconds per phase always; on a GPU the peak memory of each phase, reset at its
start, the larger kept when a phase runs twice (torch.cuda stood in for on this CPU)."""

from __future__ import annotations

import time

import torch

from marag.train.timing import Phases


def test_seconds_add_up_and_no_memory_off_the_gpu():
    p = Phases()
    for _ in range(2):
        with p("update"):
            time.sleep(0.01)
    assert p.seconds["update"] >= 0.02 and p.peak_gib == {}


def test_peak_memory_per_phase_on_a_gpu(monkeypatch):
    held = {"now": 0, "peak": 0}

    def reset():
        held["peak"] = held["now"]

    def alloc(n):
        held["now"] += n
        held["peak"] = max(held["peak"], held["now"])

    monkeypatch.setattr(torch.cuda, "reset_peak_memory_stats", reset)
    monkeypatch.setattr(torch.cuda, "max_memory_allocated", lambda: held["peak"])
    p = Phases(cuda=True)
    with p("rollout"):
        alloc(3 * 2**30)
        alloc(-2 * 2**30)
    with p("update"):  # starts from the 1 GiB still held, not the rollout's 3
        alloc(2**29)
    with p("update"):
        alloc(-2**29)
    assert p.peak_gib == {"rollout": 3.0, "update": 1.5}
    assert set(p.seconds) == {"rollout", "update"}
