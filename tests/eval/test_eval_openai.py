"""marag eval end to end against an OpenAI-compatible endpoint (marag's own LLM server
serving a tiny random model built in code), and against a dead endpoint."""

from __future__ import annotations

import json
import socket
import threading
import time

import pytest

from marag.cli import main


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def tiny_endpoint():
    import torch
    import uvicorn

    from marag.llm.hf_local import HFBackend
    from marag.llm.server import create_app
    from marag.llm.tiny import build_tiny_model

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the tiny model's matmuls only contend on a busy 2-core box
    model, tok = build_tiny_model(seed=0)
    # Its byte-level tokenizer spends ~4x the tokens of a real one on retrieved passages; RoPE
    # positions need no table, so a longer window only lifts the server's length check.
    model.config.max_position_embeddings = 4096
    app = create_app(HFBackend("tiny", model=model, tokenizer=tok, batch_wait_ms=10))
    port = _free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.01)
    assert server.started, "LLM server did not start"
    yield f"http://127.0.0.1:{port}/v1"
    server.should_exit = True
    thread.join(10)
    torch.set_num_threads(threads)


@pytest.mark.slow
def test_eval_against_openai_compatible_server(tmp_path, qa_data, nq_index, tiny_endpoint,
                                               capsys):
    out = tmp_path / "run"
    argv = ["eval", "--method", "vanilla", "--dataset",
            str(qa_data / "nq_open.questions.jsonl"), "--index", str(nq_index),
            "--limit", "4", "--concurrency", "4", "--llm", tiny_endpoint, "--model", "tiny",
            "--out", str(out), "--no-progress"]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "4 questions, 0 failed" in printed
    traces = [json.loads(line) for line in (out / "traces.jsonl").read_text().splitlines()]
    assert len(traces) == 4 and {t["status"] for t in traces} == {"ok"}
    for t in traces:
        ag = [s for s in t["steps"] if s["role"] == "AG"]
        assert len(ag) == 1 and ag[0]["model"] == "tiny"  # the name the server reported
        assert ag[0]["prompt_tokens"] > 50 and ag[0]["completion_tokens"] > 0
        assert t["cost"]["llm_calls"] == 1 and t["cost"]["retrieval_calls"] == 1
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["n"] == 4 and metrics["workflows"] == {"R,AG": 4}
    manifest = json.loads((out / "run.json").read_text())
    assert manifest["identity"]["config"]["llms"]["default"]["backend"] == "openai"
    assert "base_url" not in manifest["identity"]["config"]["llms"]["default"]
    assert "backend: openai" in (out / "config.yaml").read_text()
    # Same command again: nothing left to run, and a moved server port is not a new run.
    argv[argv.index(tiny_endpoint)] = tiny_endpoint.replace("127.0.0.1", "localhost")
    assert main(argv) == 0
    assert len((out / "traces.jsonl").read_text().splitlines()) == 4


def test_dead_endpoint_gives_counted_failed_items(tmp_path, qa_data, nq_index, capsys):
    out = tmp_path / "run"
    rc = main(["eval", "--method", "llm-only", "--dataset",
               str(qa_data / "nq_open.questions.jsonl"), "--limit", "3",
               "--llm", f"http://127.0.0.1:{_free_port()}/v1", "--model", "x",
               "--set", "llms.default.retries=0", "--set", "llms.default.timeout=2",
               "--out", str(out), "--no-progress"])
    assert rc == 1  # every item failed
    assert "3 questions, 3 failed" in capsys.readouterr().out
    traces = [json.loads(line) for line in (out / "traces.jsonl").read_text().splitlines()]
    assert len(traces) == 3
    assert all(t["status"] == "failed" and "LLMError" in t["error"] for t in traces)
    assert json.loads((out / "metrics.json").read_text())["failed"] == 3
