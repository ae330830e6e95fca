"""Fixtures for the LLM backend tests: a tiny random model (local HTTP servers: tests/conftest.py)."""

from __future__ import annotations

from collections.abc import Iterator
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
