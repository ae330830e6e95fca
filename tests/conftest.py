"""Shared fixtures. Real QA data for tests ships with the repository in tests/fixtures/qa (a small
subset of the benchmark files; the full ones in ../shared/data are for benchmarks)."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

QA_DATA = Path(__file__).resolve().parent / "fixtures" / "qa"


@pytest.fixture(scope="session")
def qa_data() -> Path:
    """The in-repo QA fixture directory: ``<dataset>.questions.jsonl``, ``<dataset>.corpus.jsonl``
    for hotpotqa, 2wikimultihopqa, musique and nq_open, and ``metric_reference.jsonl``."""
    return QA_DATA


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def _serve_app(app: Any) -> Iterator[str]:
    """Run an ASGI app with uvicorn in a thread; yield its base URL."""
    import uvicorn

    port = _free_port()
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error", lifespan="on",
                            timeout_graceful_shutdown=1)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("test server did not start")
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)


@pytest.fixture(scope="session")
def free_port() -> Any:
    return _free_port


@pytest.fixture(scope="session")
def serve_app() -> Any:
    """``with serve_app(app) as base_url:`` runs an ASGI app on a free local port."""
    return _serve_app
