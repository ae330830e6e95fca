"""Build and open indexes by kind, and the Retriever a config asks for.

This is the one module that knows which class builds and opens which index kind (as
:mod:`marag.llm.factory` knows the LLM backends); the index modules themselves only know the
manifest format in :mod:`marag.retrieval.manifest`. Heavy libraries load only for the kind used.
"""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

from marag.config import INDEX_KINDS
from marag.retrieval import demo
from marag.retrieval.base import Retriever
from marag.retrieval.manifest import MANIFEST, BadIndexError, check_corpus, read_manifest

if TYPE_CHECKING:
    from marag.config import RetrievalConfig

log = logging.getLogger(__name__)

BUILTIN_CORPORA = (demo.NAME,)


def build_index(
    corpus_path: str | os.PathLike[str],
    out_dir: str | os.PathLike[str],
    kind: str = "bm25",
    encoder: str | None = None,
    faiss_type: str = "flat",
    batch_size: int | None = None,
    show_progress: bool = True,
    **params: Any,
) -> Path:
    """Build an index of ``kind`` over a corpus file into ``out_dir`` and return that path.

    ``params``: BM25 ``k1``, ``b``, ``method``; dense ``nlist``, ``nprobe``, ``hnsw_m``,
    ``ef_search``, ``query_prefix``, ``passage_prefix``, ``device``, ``max_batches``.
    """
    out = Path(out_dir)
    if kind == "bm25":
        from marag.retrieval.bm25 import build_bm25

        return build_bm25(corpus_path, out, batch_size=batch_size or 4096,
                          show_progress=show_progress, **params)
    if kind == "dense":
        from marag.retrieval.dense import build_dense

        return build_dense(
            corpus_path, out, encoder=encoder, faiss_type=faiss_type,
            batch_size=batch_size or 128, show_progress=show_progress, **params,
        )
    if kind == "hybrid":
        from marag.retrieval.hybrid import build_hybrid

        return build_hybrid(
            corpus_path, out, encoder=encoder, faiss_type=faiss_type,
            batch_size=batch_size, show_progress=show_progress, **params,
        )
    raise ValueError(f"unknown index kind {kind!r} (choose from {', '.join(INDEX_KINDS)})")


def open_index(
    path: str | os.PathLike[str],
    check: bool = True,
    tier: str | None = None,
    nprobe: int | None = None,
    rerank: int | None = None,
) -> Retriever:
    """Open a built index directory as a Retriever (kind read from its manifest).

    ``tier``, ``nprobe`` and ``rerank`` choose how a dense index searches (see
    :mod:`marag.retrieval.tiers`); None keeps what its manifest records.
    """
    d = Path(path)
    manifest = read_manifest(d)
    kind = manifest["kind"]
    if kind == "hybrid":
        from marag.retrieval.hybrid import HybridIndex

        return HybridIndex(d, manifest, check=check)  # checks each part's corpus itself
    if check:
        check_corpus(d, manifest)
    if kind == "bm25":
        from marag.retrieval.bm25 import BM25Index

        return BM25Index(d, manifest)
    from marag.retrieval.tiered import open_dense

    return open_dense(d, manifest, tier=tier, nprobe=nprobe, rerank=rerank)


def index_dir(name_or_path: str | os.PathLike[str], kind: str = "bm25") -> Path:
    """The directory of an index: a built-in corpus name (its ``kind`` index, built into the
    cache on first use) or a path, returned as is."""
    if str(name_or_path) in BUILTIN_CORPORA:
        return demo_index(kind)
    return Path(name_or_path)


def open_retriever(cfg: RetrievalConfig) -> Retriever:
    """The Retriever a config asks for: a server URL, a built-in corpus, or an index dir."""
    if cfg.url:
        from marag.retrieval.client import RetrieverClient

        return RetrieverClient(cfg.url, timeout=cfg.timeout)
    if cfg.backend == "milvus":
        from marag.retrieval.milvus import MilvusRetriever

        return MilvusRetriever(cfg.milvus_uri or "", cfg.collection, nprobe=cfg.nprobe,
                               token_env=cfg.milvus_token_env)
    if not cfg.index:
        raise BadIndexError("retrieval config names neither an index nor a url")
    if cfg.index in BUILTIN_CORPORA:
        return open_index(demo_index(cfg.kind))
    index = open_index(cfg.index, tier=cfg.tier, nprobe=cfg.nprobe, rerank=cfg.rerank)
    built = getattr(index, "manifest", {}).get("kind")
    if built and built != cfg.kind:
        log.warning("retrieval.kind is %r but %s is a %s index; using the index as built",
                    cfg.kind, cfg.index, built)
    return index


def demo_index(kind: str = "bm25", show_progress: bool = False) -> Path:
    """Directory of the wiki-demo index of ``kind``, built into the cache on first use."""
    out = demo.cache_dir() / "indexes" / f"{demo.NAME}-{kind}"
    if (out / MANIFEST).is_file():
        return out
    corpus = demo.demo_corpus()
    # build beside the target and rename, so a concurrent or interrupted build never
    # leaves a half-written index where open_index would find it
    tmp = out.with_name(f"{out.name}.tmp-{os.getpid()}")
    log.info("building the %s %s index in %s (first use)", demo.NAME, kind, out)
    build_index(corpus, tmp, kind=kind, show_progress=show_progress)
    if out.exists() and not (out / MANIFEST).is_file():
        shutil.rmtree(out)  # leftovers of a build from an older layout
    try:
        os.replace(tmp, out)
    except OSError:
        if not (out / MANIFEST).is_file():
            raise
        shutil.rmtree(tmp, ignore_errors=True)  # another process finished first
    return out
