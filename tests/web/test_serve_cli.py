"""The ``marag serve`` command: options, the token from the environment, and one real start
with the embedded SmolLM2 model behind it (the model loaded once, shared by requests)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from webfixtures import free_port

from marag.cli import build_parser
from marag.commands.serve import token


def test_options_and_token_sources(monkeypatch):
    args = build_parser().parse_args(["serve"])
    assert (args.host, args.port, args.runs, args.token) == ("127.0.0.1", 8000, "runs", None)
    monkeypatch.delenv("MARAG_TOKEN", raising=False)
    assert token(args) is None
    assert token(build_parser().parse_args(["serve", "--token", "abcdefgh1"])) == "abcdefgh1"
    bare = build_parser().parse_args(["serve", "--token"])
    with pytest.raises(ValueError, match="MARAG_TOKEN"):
        token(bare)
    monkeypatch.setenv("MARAG_TOKEN", "from-the-env")
    assert token(bare) == "from-the-env" and token(args) == "from-the-env"


def test_bad_options_exit_2(monkeypatch, tmp_path):
    from marag.cli import main

    monkeypatch.delenv("MARAG_TOKEN", raising=False)
    assert main(["serve", "--port", "0"]) == 2
    assert main(["serve", "--token", "short"]) == 2  # tokens have at least 8 characters
    assert main(["serve", "--max-concurrent-asks", "0"]) == 2
    assert main(["serve", "--index", str(tmp_path / "missing")]) == 2


@pytest.mark.slow
def test_serve_answers_with_the_embedded_model(index_dir, runs_dir, tmp_path):
    port = free_port()
    env = {**os.environ, "MARAG_TOKEN": "token-for-test",
           "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src")}
    cmd = [sys.executable, "-m", "marag.cli", "serve", "--index", str(index_dir), "--runs",
           str(runs_dir), "--port", str(port), "--token", "--set", "llms.default.n_threads=2"]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    url = f"http://127.0.0.1:{port}"
    auth = {"Authorization": "Bearer token-for-test"}
    try:
        deadline = time.monotonic() + 180
        while True:
            assert proc.poll() is None, proc.stdout.read()  # type: ignore[union-attr]
            try:
                if httpx.get(url + "/health", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "marag serve did not come up"
            time.sleep(0.5)
        assert httpx.get(url + "/api/runs", timeout=10).status_code == 401
        runs = httpx.get(url + "/api/runs", headers=auth, timeout=10).json()["runs"]
        assert {r["name"] for r in runs} == {"jade-team", "vanilla-team"}
        r = httpx.post(url + "/api/ask", headers=auth, timeout=600, json={
            "question": "Who directed Inception?", "method": "vanilla",
            "overrides": ["method.top_k=2"]})
        assert r.status_code == 200, r.text
        t = r.json()
        assert t["status"] == "ok" and [s["role"] for s in t["steps"]] == ["R", "AG"]
        assert t["steps"][1]["model"] and t["steps"][1]["completion_tokens"] > 0
        assert len(t["steps"][0]["doc_ids"]) == 2
    finally:
        proc.terminate()
        proc.wait(30)
