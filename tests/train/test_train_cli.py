"""End to end with the real embedded SmolLM2: ``marag train`` writes metrics and checkpoints,
survives a SIGKILL by rerunning the same command, and its adapter loads in ``marag ask``."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from marag.types import Trace, read_jsonl


def _cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "marag.cli", *args]


@pytest.mark.slow
def test_train_resume_after_sigkill_and_ask_with_the_adapter(tmp_path, qa_data):
    from marag.retrieval import build_index

    index = build_index(qa_data / "nq_open.corpus.jsonl", tmp_path / "idx", kind="bm25",
                        show_progress=False)
    out = tmp_path / "run"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "2"}
    train = _cmd("train", "--method", "jade", "--index", str(index), "--out", str(out),
                 "--no-progress",
                 "--set", f"train.datasets=[{qa_data / 'nq_open.questions.jsonl'}]",
                 "--set", "train.iterations=2", "--set", "train.questions_per_iteration=2",
                 "--set", "train.samples_per_question=1", "--set", "train.temperature=0.7",
                 "--set", "train.lora.r=4", "--set", "train.micro_batch_size=4",
                 "--set", "train.holdout_per_dataset=3", "--set", "method.top_k=2")
    proc = subprocess.Popen(train, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    first = out / "checkpoints" / "iter-000001" / "state.json"
    try:
        deadline = time.monotonic() + 900
        while not first.is_file() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.5)
        assert first.is_file(), proc.stdout.read() if proc.poll() is not None else "timed out"
    finally:
        proc.send_signal(signal.SIGKILL)  # mid-way through iteration 2 (or a failed test)
        proc.wait()
    assert not (out / "checkpoints" / "iter-000002").exists()
    rows = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["iteration"] for r in rows] in ([1], [])  # the row follows its checkpoint

    done = subprocess.run(train, check=False, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "iteration 2:" in done.stdout
    rows = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["iteration"] for r in rows] == [1, 2]
    for key in ("reward", "f1", "valid.planner", "kl", "entropy", "seconds.rollout",
                "seconds.update", "trained_tokens"):
        assert key in rows[1], key
    assert (out / "metrics.csv").is_file()
    assert (out / "checkpoints" / "latest").read_text().strip() == "iter-000002"
    held = (out / "splits" / "heldout_ids.txt").read_text().split()
    trained = (out / "splits" / "train_ids.txt").read_text().split()
    assert len(held) == 3 and not set(held) & set(trained)
    used = {t.id for f in (out / "rollouts").glob("*.jsonl") for t in read_jsonl(f, Trace)}
    assert used and not used & set(held)

    adapter = out / "policy"
    assert (adapter / "adapter_config.json").is_file()
    ask = subprocess.run(_cmd("ask", "who got the first nobel prize in physics", "--method",
                              "vanilla", "--index", str(index), "--adapter", str(adapter),
                              "--json"), check=False, env=env, capture_output=True, text=True, timeout=600)
    assert ask.returncode in (0, 1), ask.stderr[-2000:]
    trace = Trace.from_dict(json.loads(ask.stdout))
    assert trace.status == "ok" and trace.steps[-1].role == "AG"
    bad = subprocess.run(_cmd("ask", "q?", "--adapter", str(tmp_path)), check=False, env=env,
                         capture_output=True, text=True, timeout=300)
    assert bad.returncode != 0 and "adapter_config.json" in bad.stderr


def test_a_run_resumes_with_another_iteration_count_only():
    """Extending a run (``--set train.iterations=N``) resumes it; any other change is refused
    without --force."""
    from marag.commands.train import _only_longer
    from marag.config import load_config

    saved = load_config(None, ["train.iterations=4"]).model_dump(mode="json")
    assert _only_longer(saved, load_config(None, ["train.iterations=12"]).model_dump(mode="json"))
    assert not _only_longer(saved, load_config(None, ["train.iterations=12", "train.lr=0.1"]
                                               ).model_dump(mode="json"))
    # a run saved before a setting existed resumes while the setting stays at its default
    older = {**saved, "train": {k: v for k, v in saved["train"].items() if k != "scale_rewards"}}
    assert _only_longer(older, load_config(None, ["train.iterations=12"]).model_dump(mode="json"))
    assert not _only_longer(older, load_config(None, ["train.scale_rewards=none"]
                                               ).model_dump(mode="json"))
