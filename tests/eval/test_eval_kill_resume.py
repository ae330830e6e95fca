"""SIGKILL a real evaluation halfway, restart it, and find every question exactly once."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

HELPER = Path(__file__).with_name("kill_resume_run.py")
N = 40


def _lines(path: Path) -> int:
    return path.read_bytes().count(b"\n") if path.exists() else 0


def _start(out: Path, index: Path, questions: Path, latency: float) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, str(HELPER), str(out), str(index), str(questions), str(N), str(latency)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE)


@pytest.mark.slow
def test_sigkill_then_resume_records_every_question_once(tmp_path, qa_data, nq_index):
    if not hasattr(signal, "SIGKILL"):
        pytest.skip("needs SIGKILL")
    questions = qa_data / "nq_open.questions.jsonl"
    out = tmp_path / "run"
    traces = out / "traces.jsonl"
    proc = _start(out, nq_index, questions, latency=0.1)
    deadline = time.monotonic() + 60
    while _lines(traces) < 8 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    assert proc.poll() is None, "the run ended before it could be killed: " + proc.stderr.read().decode()
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    killed_at = _lines(traces)
    assert 0 < killed_at < N
    assert not (out / "metrics.json").exists()

    # Simulate the worst moment of the kill too: half a line written, no newline.
    with open(traces, "ab") as f:
        f.write(b'{"id": "nq-open-oracle-39", "question": "who sang')

    done = subprocess.run([sys.executable, str(HELPER), str(out), str(nq_index), str(questions),
                           str(N), "0"], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    ids = [json.loads(line)["id"] for line in traces.read_text().splitlines()]
    assert len(ids) == N and len(set(ids)) == N
    assert set(ids) == {json.loads(line)["id"]
                        for line in questions.read_text().splitlines()[:N]}
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["n"] == N and metrics["failed"] == 0
    assert metrics["workflows"] == {"R,AG": N}
    manifest = json.loads((out / "run.json").read_text())
    assert len(manifest["resumes"]) == 1
