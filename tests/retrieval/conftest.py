"""Indexes built once per test session over real passages (the nq_open fixture corpus)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

# Everything here must work without the Hugging Face hub; set before any HF import.
os.environ.setdefault("HF_HUB_OFFLINE", "1")

N_PASSAGES = 60  # every passage of the nq_open fixture corpus
DENSE_BATCH = 64


@pytest.fixture(scope="session")
def nq_corpus(qa_data, tmp_path_factory) -> Path:
    """The nq_open fixture corpus (N_PASSAGES passages), as a corpus file of its own."""
    out = tmp_path_factory.mktemp("corpus") / "nq.jsonl"
    with open(qa_data / "nq_open.corpus.jsonl", encoding="utf-8") as f:
        lines = f.readlines()
    assert len(lines) == N_PASSAGES
    out.write_text("".join(lines), encoding="utf-8")
    return out


@pytest.fixture(scope="session")
def nq_queries(qa_data) -> list[str]:
    from marag.types import iter_jsonl

    return [q["question"] for _, q in iter_jsonl(qa_data / "nq_open.questions.jsonl")][:40]


@pytest.fixture(scope="session")
def bm25_index(nq_corpus, tmp_path_factory) -> Path:
    from marag.retrieval import build_index

    return build_index(nq_corpus, tmp_path_factory.mktemp("idx") / "bm25", show_progress=False)


@pytest.fixture(scope="session")
def dense_index(nq_corpus, tmp_path_factory) -> Path:
    from marag.retrieval import build_index

    out = tmp_path_factory.mktemp("idx") / "dense"
    return build_index(nq_corpus, out, kind="dense", batch_size=DENSE_BATCH, show_progress=False)


@pytest.fixture(scope="session")
def demo_cache(tmp_path_factory) -> Path:
    """MARAG_CACHE for the session, holding the wiki-demo BM25 index (built once)."""
    from marag.retrieval.factory import demo_index

    cache = tmp_path_factory.mktemp("cache")
    old = os.environ.get("MARAG_CACHE")
    os.environ["MARAG_CACHE"] = str(cache)
    try:
        demo_index("bm25")
        yield cache
    finally:
        if old is None:
            os.environ.pop("MARAG_CACHE", None)
        else:
            os.environ["MARAG_CACHE"] = old
