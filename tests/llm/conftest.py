"""Fixtures for the LLM backend tests: a tiny random model and local HTTP servers."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest


@pytest.fixture(scope="module", autouse=True)
def _one_torch_thread() -> Iterator[None]:
    # The tiny model does microsecond-sized matmuls; on a busy 2-core box extra torch threads
    # only spin against each other (measured 0.12 s vs 8.6 s for the same decode).
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def tiny() -> tuple[Any, Any]:
    from marag.llm.tiny import build_tiny_model

    return build_tiny_model(seed=0)


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
