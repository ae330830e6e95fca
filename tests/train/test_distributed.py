"""Data parallelism through accelerate: 2 CPU processes (gloo) make the same update as one
process with the same global batch."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

JOB = Path(__file__).with_name("ddp_job.py")


def _launch(out: Path, processes: int) -> dict:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    # --multi_gpu selects accelerate's torchrun launcher; with no GPU each process's
    # Accelerator falls back to CPU and gloo
    cmd = [sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu",
           "--num_processes", str(processes), "--num_machines", "1", "--main_process_port", "0",
           "--mixed_precision", "no", "--dynamo_backend", "no", str(JOB), str(out)]
    if processes == 1:
        cmd = [sys.executable, str(JOB), str(out)]
    done = subprocess.run(cmd, check=False, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return torch.load(out / "result.pt", weights_only=False)


@pytest.mark.slow
def test_two_processes_make_the_same_update_as_one(tmp_path):
    one = _launch(tmp_path / "one", 1)
    two = _launch(tmp_path / "two", 2)
    assert one["world"] == 1 and two["world"] == 2
    assert one["row"]["traces"] == two["row"]["traces"] == 8
    assert one["row"]["transitions"] == two["row"]["transitions"] == 8
    assert one["row"]["reward"] == pytest.approx(two["row"]["reward"])
    assert set(one["params"]) == set(two["params"])
    moved = 0
    for name, p1 in one["params"].items():
        p2 = two["params"][name]
        assert torch.allclose(p1, p2, atol=2e-5, rtol=1e-4), name
        moved += 1
    assert moved > 0
