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


FSDP_JOB = Path(__file__).with_name("fsdp_job.py")


def _run_fsdp_job(out: Path, url: str, processes: int) -> dict:
    import socket

    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    if processes == 1:
        cmd = [sys.executable, str(FSDP_JOB), str(out), url, "plain"]
    else:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        cmd = [sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu",
               "--num_processes", str(processes), "--num_machines", "1",
               "--main_process_port", str(port), "--mixed_precision", "no",
               "--dynamo_backend", "no", str(FSDP_JOB), str(out), url, "fsdp"]
    done = subprocess.run(cmd, check=False, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return torch.load(out / "result.pt", weights_only=False)


@pytest.mark.slow
def test_fsdp_on_two_processes_trains_and_resumes_as_one_process(tmp_path, serve_app):
    """Rollouts from a serve-llm thread; one plain process runs 2 iterations, 2 processes
    with the policy sharded by FSDP2 run iteration 1, checkpoint, and a fresh sharded trainer
    resumes and runs iteration 2. Same rollouts, same updates, same adapter on disk."""
    from safetensors.torch import load_file

    from marag.llm.hf_local import HFBackend
    from marag.llm.server import create_app
    from marag.llm.tiny import build_tiny_model

    model, tok = build_tiny_model(seed=0)
    # one request at a time: a batch's padding would make the sampled tokens depend on
    # which requests the two runs happen to send together
    app = create_app(HFBackend("tiny", model=model, tokenizer=tok, batch_wait_ms=0,
                               max_batch_size=1), ["tiny"], allow_lora_updates=True)
    with serve_app(app) as base:
        url = f"{base}/v1"
        one = _run_fsdp_job(tmp_path / "one", url, 1)
        two = _run_fsdp_job(tmp_path / "two", url, 2)
    assert (one["world"], one["sharded"]) == (1, "")
    assert (two["world"], two["sharded"], two["kinds"]) == (2, "FSDP2", ["DTensor"])
    assert [r["iteration"] for r in two["rows"]] == [1, 2]
    for r1, r2 in zip(one["rows"], two["rows"], strict=True):
        assert r1["traces"] == r2["traces"] == 8
        assert r1["trained_tokens"] == r2["trained_tokens"]
        assert r1["reward"] == pytest.approx(r2["reward"])
        assert r1["grad_norm"] == pytest.approx(r2["grad_norm"], rel=1e-4)
        assert r1["kl"] == pytest.approx(r2["kl"], rel=1e-4, abs=1e-7)
        assert r2["logprob_gap"] < 1e-4  # the server decoded with the gathered adapter
    # the reference (adapter off) differs from the policy once the adapter has moved
    assert two["rows"][1]["kl"] > 1e-3
    assert set(one["params"]) == set(two["params"]) and one["params"]
    for name, p1 in one["params"].items():
        assert torch.allclose(p1, two["params"][name], atol=2e-6, rtol=1e-4), name
    # what the main process wrote is whole, not a shard: the checkpoint's tensors, the
    # exported adapter and the last adapter sent to the server
    saved = torch.load(tmp_path / "two" / "checkpoints" / "iter-000002" / "trainable.pt")
    assert {n: t.shape for n, t in saved.items()} == {
        n: t.shape for n, t in one["params"].items()}
    for folder in ("policy", "sync/adapter-iter-000002"):
        a = load_file(tmp_path / "one" / folder / "adapter_model.safetensors")
        b = load_file(tmp_path / "two" / folder / "adapter_model.safetensors")
        assert set(a) == set(b) and a
        for k in a:
            assert torch.allclose(a[k], b[k], atol=2e-6, rtol=1e-4), (folder, k)
