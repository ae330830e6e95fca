"""Retrieval: corpora indexed with BM25 (bm25s), dense encoders + faiss, or both fused.

``import marag.retrieval`` stays light; bm25s, faiss and sentence-transformers load only
when an index of that kind is built or opened.

    from marag.retrieval import build_index, open_index, open_retriever
    build_index("corpus.jsonl", "idx/bm25", kind="bm25")
    hits = open_index("idx/bm25").search_batch(["who wrote hamlet"], k=5)
"""

from __future__ import annotations

from typing import Any

from marag.retrieval.base import RetrievalError, Retriever

__all__ = [
    "BadIndexError",
    "RetrievalError",
    "Retriever",
    "build_index",
    "open_index",
    "open_retriever",
    "rrf",
]

_LAZY = {
    "build_index": "marag.retrieval.factory",
    "open_index": "marag.retrieval.factory",
    "open_retriever": "marag.retrieval.factory",
    "BadIndexError": "marag.retrieval.manifest",
    "rrf": "marag.retrieval.hybrid",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'marag.retrieval' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
