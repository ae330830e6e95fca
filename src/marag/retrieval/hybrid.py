"""Hybrid retrieval: a BM25 and a dense index fused by reciprocal-rank fusion (RRF).

A hybrid index directory holds only a manifest that names its two parts (sub-directories,
or any other index directories), so existing BM25 and dense indexes can be combined without
rebuilding either.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from marag.retrieval.base import Retriever
from marag.retrieval.manifest import (
    MANIFEST,
    BadIndexError,
    check_corpus,
    read_manifest,
    write_manifest,
)
from marag.types import Hits

BM25_KEYS = ("k1", "b", "method")


def rrf(
    rankings: list[list[str]], k: int = 60, weights: list[float] | None = None
) -> list[tuple[str, float]]:
    """Reciprocal-rank fusion: ``score(d) = sum_i w_i / (k + rank_i(d))`` with 1-based ranks.

    Returns ``(id, score)`` best first; ties keep the order in which ids were first seen,
    so the result is deterministic.
    """
    if weights is None:
        weights = [1.0] * len(rankings)
    if len(weights) != len(rankings):
        raise ValueError(f"rrf: {len(weights)} weights for {len(rankings)} rankings")
    scores: dict[str, float] = {}
    for ranking, w in zip(rankings, weights, strict=True):
        for rank, doc in enumerate(ranking, 1):
            if doc in scores:
                scores[doc] += w / (k + rank)
            else:
                scores[doc] = w / (k + rank)
    return sorted(scores.items(), key=lambda kv: -kv[1])  # sorted() is stable


def make_hybrid(
    out_dir: str | os.PathLike[str],
    bm25_dir: str | os.PathLike[str],
    dense_dir: str | os.PathLike[str],
    rrf_k: int = 60,
    weights: list[float] | None = None,
    depth: int = 50,
    build_seconds: float = 0.0,
) -> Path:
    """Write a hybrid manifest over two built indexes of the same corpus."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    parts = {"bm25": Path(bm25_dir), "dense": Path(dense_dir)}
    manifests = {name: read_manifest(p) for name, p in parts.items()}
    for name, m in manifests.items():
        if m["kind"] != name:
            raise BadIndexError(f"{parts[name]}: expected a {name} index, found {m['kind']}")
    c_bm25, c_dense = manifests["bm25"]["corpus"], manifests["dense"]["corpus"]
    if c_bm25.get("sha256") != c_dense.get("sha256"):
        raise BadIndexError(f"{parts['bm25']} and {parts['dense']} were built from different corpora")
    # relative paths keep a self-contained hybrid directory movable
    refs = {n: os.path.relpath(p.resolve(), out.resolve()) for n, p in parts.items()}
    write_manifest(
        out, kind="hybrid", corpus=c_bm25, count=manifests["bm25"]["count"],
        build_seconds=build_seconds, params={"rrf_k": rrf_k, "weights": weights or [1.0, 1.0], "depth": depth},
        parts=refs, encoder=manifests["dense"].get("encoder"),
    )
    return out


def build_hybrid(
    corpus_path: str | os.PathLike[str],
    out_dir: str | os.PathLike[str],
    encoder: str | None = None,
    faiss_type: str = "flat",
    batch_size: int | None = None,
    show_progress: bool = True,
    rrf_k: int = 60,
    weights: list[float] | None = None,
    depth: int = 50,
    **params: Any,
) -> Path:
    from marag.retrieval.bm25 import build_bm25
    from marag.retrieval.dense import build_dense

    t0 = time.perf_counter()
    out = Path(out_dir)
    (out / MANIFEST).unlink(missing_ok=True)  # a rebuild that fails must not look finished
    bm25_params = {k: params.pop(k) for k in BM25_KEYS if k in params}
    build_bm25(corpus_path, out / "bm25", batch_size=4096, show_progress=show_progress, **bm25_params)
    build_dense(
        corpus_path, out / "dense", encoder=encoder, faiss_type=faiss_type,
        batch_size=batch_size or 128, show_progress=show_progress, **params,
    )
    return make_hybrid(out, out / "bm25", out / "dense", rrf_k, weights, depth, time.perf_counter() - t0)


class HybridIndex(Retriever):
    """RRF over the top ``depth`` rows of each part; both parts share the corpus row order."""

    name = "hybrid"

    def __init__(
        self, index_dir: str | os.PathLike[str], manifest: dict[str, Any] | None = None, check: bool = True
    ) -> None:
        self.dir = Path(index_dir)
        self.manifest = manifest or read_manifest(self.dir)
        parts = self.manifest.get("parts") or {}
        if set(parts) != {"bm25", "dense"}:
            raise BadIndexError(f"{self.dir}: hybrid manifest must name 'bm25' and 'dense' parts")
        from marag.retrieval.bm25 import BM25Index
        from marag.retrieval.tiered import open_dense

        self.bm25 = _open_part(BM25Index, self.dir / parts["bm25"], check)
        self.dense = _open_part(open_dense, self.dir / parts["dense"], check)
        if len(self.bm25) != len(self.dense):  # type: ignore[arg-type]
            raise BadIndexError(f"{self.dir}: parts index different passage counts")
        params = self.manifest.get("params", {})
        self.rrf_k = int(params.get("rrf_k", 60))
        self.weights = list(params.get("weights", [1.0, 1.0]))
        self.depth = int(params.get("depth", 50))

    def __len__(self) -> int:
        return len(self.bm25)  # type: ignore[arg-type]

    def search_batch(self, queries: list[str], k: int) -> list[Hits]:
        depth = max(k, self.depth)
        b_rows, _ = self.bm25.search_rows(queries, depth)  # type: ignore[attr-defined]
        d_rows, _ = self.dense.search_rows(queries, depth)  # type: ignore[attr-defined]
        out = []
        for q, br, dr in zip(queries, b_rows.tolist(), d_rows.tolist(), strict=True):
            fused = rrf([[str(r) for r in br if r >= 0], [str(r) for r in dr if r >= 0]], self.rrf_k, self.weights)[:k]
            passages = self.bm25.store.get_many(int(r) for r, _ in fused)  # type: ignore[attr-defined]
            out.append(Hits(q, passages, [s for _, s in fused]))
        return out

    def close(self) -> None:
        self.bm25.close()
        self.dense.close()


def _open_part(cls: Any, path: Path, check: bool) -> Any:
    """A part index of the kind ``cls`` opens (its constructor refuses any other kind)."""
    manifest = read_manifest(path)
    if check:
        check_corpus(path, manifest)
    return cls(path, manifest)
