"""A dense index served from a flat vector file it references, in one of its memory tiers.

Imported indexes (``marag index import``) and compressed ones (``marag index compress``)
carry a ``vectors`` record (the flat file, memory-mapped, never loaded), a ``query_encoder``
record (how queries must be encoded) and ``tiers`` (``flat-mmap`` always; ``ivf-sq8`` and
``opq-ivfpq`` once built). Which tier serves is the caller's choice, else ``default_tier``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from marag.retrieval.base import Retriever
from marag.retrieval.encoding import EncoderMismatch, EncoderSettings, check_model
from marag.retrieval.manifest import BadIndexError, open_store, read_manifest
from marag.retrieval.tiers import TIERS, TierSearcher
from marag.retrieval.vectors import VectorFile, VectorFileError
from marag.types import Hits


def is_tiered(manifest: dict[str, Any]) -> bool:
    return manifest.get("kind") == "dense" and "vectors" in manifest


def open_dense(path: Path, manifest: dict[str, Any], tier: str | None = None,
               nprobe: int | None = None, rerank: int | None = None) -> Retriever:
    """The dense index at ``path``: tiered (imported or compressed) or built by marag."""
    if is_tiered(manifest):
        return TieredDenseIndex(path, manifest, tier=tier, nprobe=nprobe, rerank=rerank)
    if tier not in (None, "flat-mmap") or rerank:
        raise BadIndexError(f"{path}: tiers and re-ranking need a compressed index "
                            f"(marag index compress {path} --tier ...)")
    from marag.retrieval.dense import DenseIndex

    return DenseIndex(path, manifest, nprobe=nprobe)


class TieredDenseIndex(Retriever):
    name = "dense"

    def __init__(
        self,
        index_dir: str | os.PathLike[str],
        manifest: dict[str, Any] | None = None,
        tier: str | None = None,
        nprobe: int | None = None,
        rerank: int | None = None,
        device: str = "cpu",
        load_encoder: bool = True,
    ) -> None:
        self.dir = Path(index_dir)
        self.manifest = manifest or read_manifest(self.dir)
        if not is_tiered(self.manifest):
            raise BadIndexError(f"{self.dir}: not an imported or compressed dense index")
        tiers = self.manifest.get("tiers") or {"flat-mmap": {}}
        self.tier = tier or self.manifest.get("default_tier") or "flat-mmap"
        if self.tier not in tiers:
            built = ", ".join(tiers)
            hint = (f"; build it with: marag index compress {self.dir} --tier {self.tier}"
                    if self.tier in TIERS else f" (tiers: {', '.join(TIERS)})")
            raise BadIndexError(f"{self.dir}: tier {self.tier!r} not built (built: {built}){hint}")
        try:
            vf = VectorFile.from_dict(self.manifest["vectors"])
            vf.check_unchanged(self.manifest["vectors"])
        except VectorFileError as e:
            raise BadIndexError(f"{self.dir}: {e}") from None
        self.vectors = vf
        self.vecs = vf.open()
        record = tiers[self.tier]
        file = self.dir / record["file"] if record.get("file") else None
        try:
            self.reader = vf.reader()
            self.searcher = TierSearcher(self.tier, self.reader, vf.metric, file, nprobe=nprobe,
                                         rerank_depth=rerank, params=record.get("params"))
        except FileNotFoundError as e:
            raise BadIndexError(f"{self.dir}: {e}") from None
        self.settings = EncoderSettings.from_dict(self.manifest["query_encoder"])
        self.encoder = None
        if load_encoder:
            from marag.retrieval.dense import load_encoder as load

            try:
                self.encoder = load(self.settings.name, device)
            except OSError as e:  # not downloaded, no hub access...
                raise BadIndexError(f"{self.dir}: cannot load the query encoder {self.settings.name}: {e}") from None
            try:
                check_model(self.encoder, self.settings)
            except EncoderMismatch as e:
                raise BadIndexError(f"{self.dir}: {e}") from None
        self.store = open_store(self.dir, self.manifest)
        if len(self.store) != vf.rows:
            raise BadIndexError(f"{self.dir}: {len(self.store)} passages but {vf.rows} vectors")

    def __len__(self) -> int:
        return len(self.store)

    def encode_queries(self, queries: list[str]) -> np.ndarray:
        if self.encoder is None:
            raise BadIndexError(f"{self.dir}: opened without its encoder")
        vecs = self.encoder.encode(
            [self.settings.query_prefix + q for q in queries], batch_size=64,
            normalize_embeddings=self.settings.normalize, convert_to_numpy=True,
            show_progress_bar=False)
        return np.ascontiguousarray(vecs, dtype=np.float32)

    def search_vectors(self, vecs: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Rows (-1 = none) and scores for already-encoded queries."""
        scores, rows = self.searcher.search(np.ascontiguousarray(vecs, dtype=np.float32), k)
        return rows, scores

    def search_rows(self, queries: list[str], k: int) -> tuple[np.ndarray, np.ndarray]:
        if not queries or k <= 0 or len(self.store) == 0:
            return np.empty((len(queries), 0), np.int64), np.empty((len(queries), 0), np.float32)
        return self.search_vectors(self.encode_queries(queries), k)

    def search_batch(self, queries: list[str], k: int) -> list[Hits]:
        rows, scores = self.search_rows(queries, k)
        out = []
        for q, r, s in zip(queries, rows.tolist(), scores.tolist(), strict=True):
            keep = [i for i, row in enumerate(r) if row >= 0]
            out.append(Hits(q, self.store.get_many(r[i] for i in keep),
                            [float(s[i]) for i in keep]))
        return out

    def close(self) -> None:
        self.store.close()
        self.reader.close()
