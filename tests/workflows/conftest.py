"""Fixtures for workflow tests: a real BM25 index over the HotpotQA fixture passages
and a helper that builds a Context around scripted backends."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from marag.config import load_config
from marag.retrieval.base import Retriever
from marag.workflows import Context


@pytest.fixture(scope="session")
def hotpot_retriever(qa_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Retriever:
    from marag.retrieval import build_index, open_index

    out = tmp_path_factory.mktemp("hotpot_bm25")
    build_index(qa_data / "hotpotqa.corpus.jsonl", out / "idx", kind="bm25")
    return open_index(out / "idx")


def make_ctx(llms: Any, retriever: Retriever | None, *overrides: str) -> Context:
    """``llms``: one backend (used for every role) or a dict by config name; ``overrides`` are
    config overrides such as ``"method.max_rounds=3"``."""
    if not isinstance(llms, dict):
        llms = {"default": llms}
    items = [f"llms.{name}.backend=scripted" for name in llms]
    return Context(llms=llms, config=load_config(None, [*items, *overrides]), retriever=retriever)


@pytest.fixture
def ctx_for():  # type: ignore[no-untyped-def]
    return make_ctx
