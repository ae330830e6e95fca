"""Index directories: the manifest, building by kind, and opening any index as a Retriever.

An index is a directory holding ``manifest.json`` (kind, encoder, corpus path and checksum,
passage count, build time, marag version, parameters), the kind's own files and a ``docs/``
document store. A hybrid index holds a BM25 and a dense index as sub-directories.
"""

from __future__ import annotations

import json
import logging
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from marag.retrieval.base import RetrievalError, Retriever

if TYPE_CHECKING:
    from marag.config import RetrievalConfig

log = logging.getLogger(__name__)

MANIFEST = "manifest.json"
STORE_DIR = "docs"
FORMAT_VERSION = 1
KINDS = ("bm25", "dense", "hybrid")
BUILTIN_CORPORA = ("wiki-demo",)


class BadIndexError(RetrievalError):
    """An index directory that cannot be opened: missing, incomplete or stale."""


def corpus_record(corpus_path: str | os.PathLike[str]) -> dict[str, Any]:
    from marag.corpus import file_checksum

    p = Path(corpus_path)
    if not p.is_file():
        raise FileNotFoundError(f"corpus file not found: {corpus_path}")
    return {"path": str(p.resolve()), **file_checksum(p)}


def write_manifest(
    out: Path,
    kind: str,
    corpus: dict[str, Any],
    count: int,
    build_seconds: float,
    params: dict[str, Any],
    **extra: Any,
) -> dict[str, Any]:
    from marag import __version__

    manifest = {
        "format": FORMAT_VERSION,
        "kind": kind,
        **extra,
        "corpus": corpus,
        "count": count,
        "built_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "build_seconds": round(build_seconds, 3),
        "marag_version": __version__,
        "params": params,
    }
    tmp = out / (MANIFEST + ".tmp")
    tmp.write_text(json.dumps(manifest, indent=2, ensure_ascii=False))
    tmp.replace(out / MANIFEST)  # the manifest appears only once the index is complete
    return manifest


def read_manifest(index_dir: str | os.PathLike[str]) -> dict[str, Any]:
    d = Path(index_dir)
    if not d.exists():
        raise BadIndexError(f"index directory not found: {d}")
    if not d.is_dir():
        raise BadIndexError(f"not an index directory: {d}")
    path = d / MANIFEST
    if not path.is_file():
        raise BadIndexError(f"{d}: no {MANIFEST} (not an index, or its build did not finish)")
    try:
        manifest = json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise BadIndexError(f"{path}: invalid JSON ({e.msg})") from None
    if manifest.get("kind") not in KINDS:
        raise BadIndexError(f"{path}: unknown index kind {manifest.get('kind')!r}")
    return manifest


def check_corpus(index_dir: Path, manifest: dict[str, Any]) -> None:
    """Refuse an index whose corpus file still exists but has changed since the build."""
    from marag.corpus import checksum_matches

    corpus = manifest.get("corpus") or {}
    path = corpus.get("path")
    if not path or not Path(path).is_file():
        log.debug("%s: corpus %s is gone; serving from the index's own store", index_dir, path)
        return
    if not checksum_matches(path, corpus):
        raise BadIndexError(
            f"{index_dir}: corpus {path} changed since the index was built "
            f"({corpus.get('kind', 'sha256')} checksum mismatch); rebuild the index"
        )


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

        return build_bm25(corpus_path, out, batch_size=batch_size or 4096, show_progress=show_progress, **params)
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
    raise ValueError(f"unknown index kind {kind!r} (choose from {', '.join(KINDS)})")


def open_index(path: str | os.PathLike[str], check: bool = True) -> Retriever:
    """Open a built index directory as a Retriever (kind read from its manifest)."""
    d = Path(path)
    manifest = read_manifest(d)
    if check and manifest["kind"] != "hybrid":
        check_corpus(d, manifest)
    kind = manifest["kind"]
    if kind == "bm25":
        from marag.retrieval.bm25 import BM25Index

        return BM25Index(d, manifest)
    if kind == "dense":
        from marag.retrieval.dense import DenseIndex

        return DenseIndex(d, manifest)
    from marag.retrieval.hybrid import HybridIndex

    return HybridIndex(d, manifest, check=check)


def open_retriever(cfg: RetrievalConfig) -> Retriever:
    """The Retriever a config asks for: a server URL, a built-in corpus, or an index dir."""
    if cfg.url:
        from marag.retrieval.client import RetrieverClient

        return RetrieverClient(cfg.url, timeout=cfg.timeout)
    if not cfg.index:
        raise BadIndexError("retrieval config names neither an index nor a url")
    if cfg.index in BUILTIN_CORPORA:
        from marag.retrieval.demo import demo_index

        return open_index(demo_index(cfg.kind))
    index = open_index(cfg.index)
    built = getattr(index, "manifest", {}).get("kind")
    if built and built != cfg.kind:
        log.warning("retrieval.kind is %r but %s is a %s index; using the index as built", cfg.kind, cfg.index, built)
    return index
