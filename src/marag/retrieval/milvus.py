"""Milvus as the dense retrieval backend, for corpora or worker counts beyond one machine.

``index_to_milvus`` copies a dense index (its flat vectors, read from the memory-mapped file
in batches, and its passages) into a Milvus collection: ``row`` (INT64 primary key = the
index row), ``vector``, ``pid``, ``title``, ``text``. The query encoder's settings travel in
the collection's properties, so ``MilvusRetriever`` needs only a URI and a collection name
and encodes queries exactly as a local index would. The URI is a Milvus Lite file
(``./wiki.db``: the engine embedded in-process, for tests and laptops) or a Milvus server or
cluster (``http://host:19530``, a Zilliz Cloud endpoint); pymilvus speaks to all of them.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from marag.retrieval.base import RetrievalError, Retriever
from marag.retrieval.encoding import EncoderMismatch, EncoderSettings, check_model
from marag.types import Hits, Passage

SETTINGS_KEY = "marag.query_encoder"
COUNT_KEY = "marag.count"
MAX_TEXT = 65535  # Milvus VARCHAR limit
SEARCH_CHUNK = 1024  # queries per Milvus search call
METRIC = {"inner_product": "IP", "l2": "L2"}


def connect(uri: str, token_env: str | None = None, timeout: float = 30.0) -> Any:
    try:
        from pymilvus import MilvusClient
    except ImportError:
        raise RetrievalError("the Milvus backend needs pymilvus: pip install 'marag[milvus]'") from None
    if not uri:
        raise RetrievalError("no Milvus URI given (a Milvus Lite file like ./wiki.db, or "
                             "http://host:19530)")
    token = os.environ.get(token_env, "") if token_env else ""
    if token_env and not token:
        raise RetrievalError(f"environment variable {token_env} (the Milvus token) is not set")
    if "://" not in uri:
        Path(uri).resolve().parent.mkdir(parents=True, exist_ok=True)
    try:
        return MilvusClient(uri=uri, token=token, timeout=timeout)
    except Exception as e:  # noqa: BLE001 - pymilvus raises MilvusException, grpc errors...
        raise RetrievalError(f"cannot connect to Milvus at {uri}: {e}") from None


def index_to_milvus(
    index_dir: str | os.PathLike[str],
    uri: str,
    collection: str = "marag",
    index_type: str = "FLAT",
    nlist: int | None = None,
    batch: int = 2048,
    token_env: str | None = None,
    overwrite: bool = False,
    log: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Copy a dense index into ``collection`` at ``uri``; returns rows, time and settings."""
    from pymilvus import DataType

    from marag.retrieval.imported import as_tiered
    from marag.retrieval.manifest import BadIndexError, open_store, read_manifest
    from marag.retrieval.vectors import VectorFile

    d = Path(index_dir)
    manifest = read_manifest(d)
    if manifest["kind"] != "dense":
        raise BadIndexError(f"{d}: only dense indexes move to Milvus (this one is "
                            f"{manifest['kind']})")
    manifest = as_tiered(d, manifest)
    vf = VectorFile.from_dict(manifest["vectors"])
    settings = EncoderSettings.from_dict(manifest["query_encoder"])
    t0 = time.perf_counter()
    client = connect(uri, token_env)
    if client.has_collection(collection):
        if not overwrite:
            raise RetrievalError(f"Milvus collection {collection!r} exists at {uri} "
                                 "(--overwrite drops it first)")
        client.drop_collection(collection)
    schema = client.create_schema(auto_id=False)
    schema.add_field("row", DataType.INT64, is_primary=True)
    schema.add_field("vector", DataType.FLOAT_VECTOR, dim=vf.dim)
    schema.add_field("pid", DataType.VARCHAR, max_length=1024)
    schema.add_field("title", DataType.VARCHAR, max_length=4096)
    schema.add_field("text", DataType.VARCHAR, max_length=MAX_TEXT)
    params = client.prepare_index_params()
    extra = {"nlist": nlist} if nlist else {}
    params.add_index(field_name="vector", index_type=index_type, metric_type=METRIC[vf.metric],
                     params=extra)
    client.create_collection(collection, schema=schema, index_params=params)
    client.alter_collection_properties(collection, properties={
        SETTINGS_KEY: json.dumps(settings.to_dict()), COUNT_KEY: str(vf.rows)})
    vecs = vf.open()
    store = open_store(d, manifest)
    try:
        for lo in range(0, vf.rows, batch):
            hi = min(vf.rows, lo + batch)
            rows = []
            for i, (p, v) in enumerate(zip(store.get_many(range(lo, hi)), vecs[lo:hi],
                                           strict=True)):
                if len(p.text.encode("utf-8")) > MAX_TEXT:
                    raise RetrievalError(f"{d}: passage {p.id} (row {lo + i}) is longer than "
                                         f"Milvus' {MAX_TEXT}-byte text field")
                rows.append({"row": lo + i, "vector": v, "pid": p.id, "title": p.title[:4096],
                             "text": p.text})
            client.insert(collection, rows)
            if log and (hi == vf.rows or (lo // batch) % 50 == 0):
                log(f"to-milvus: {hi} of {vf.rows} rows")
    finally:
        store.close()
    client.flush(collection)
    client.close()
    return {"rows": vf.rows, "seconds": time.perf_counter() - t0, "index_type": index_type,
            "metric": METRIC[vf.metric], "settings": settings.to_dict()}


class MilvusRetriever(Retriever):
    """Dense retrieval from a Milvus collection made by ``index_to_milvus``."""

    name = "milvus"

    def __init__(self, uri: str, collection: str = "marag", nprobe: int | None = None,
                 token_env: str | None = None, device: str = "cpu",
                 load_encoder: bool = True) -> None:
        self.uri, self.collection, self.nprobe = uri, collection, nprobe
        if "://" not in uri and not Path(uri).exists():
            raise RetrievalError(f"Milvus Lite file not found: {uri} (make it with "
                                 "marag index to-milvus INDEX --uri FILE)")
        self.client = connect(uri, token_env)
        try:
            if not self.client.has_collection(collection):
                raise RetrievalError(f"no Milvus collection {collection!r} at {uri}")
            props = self.client.describe_collection(collection).get("properties") or {}
        except RetrievalError:
            raise
        except Exception as e:  # noqa: BLE001 - any pymilvus failure, reported with the URI
            raise RetrievalError(f"Milvus at {uri}: {e}") from None
        if SETTINGS_KEY not in props:
            raise RetrievalError(f"Milvus collection {collection!r} was not made by marag "
                                 f"(no {SETTINGS_KEY} property)")
        self.settings = EncoderSettings.from_dict(json.loads(props[SETTINGS_KEY]))
        self.count = int(props.get(COUNT_KEY, 0))
        self.manifest = {"kind": "dense", "backend": "milvus", "uri": uri,
                         "collection": collection, "query_encoder": self.settings.to_dict(),
                         "count": self.count}
        self.metric = "IP" if self.settings.metric == "inner_product" else "L2"
        self.encoder = None
        if load_encoder:
            from marag.retrieval.dense import load_encoder as load

            try:
                self.encoder = load(self.settings.name, device)
            except OSError as e:  # not downloaded, no hub access...
                raise RetrievalError(f"Milvus collection {collection!r}: cannot load the query encoder {self.settings.name}: {e}") from None
            try:
                check_model(self.encoder, self.settings)
            except EncoderMismatch as e:
                raise RetrievalError(f"Milvus collection {collection!r}: {e}") from None
        self.client.load_collection(collection)

    def __len__(self) -> int:
        return self.count

    def encode_queries(self, queries: list[str]) -> np.ndarray:
        if self.encoder is None:
            raise RetrievalError("MilvusRetriever opened without its encoder")
        vecs = self.encoder.encode([self.settings.query_prefix + q for q in queries],
                                   batch_size=64, normalize_embeddings=self.settings.normalize,
                                   convert_to_numpy=True, show_progress_bar=False)
        return np.ascontiguousarray(vecs, dtype=np.float32)

    def search_vectors(self, vecs: np.ndarray, k: int) -> list[list[dict[str, Any]]]:
        params: dict[str, Any] = {"metric_type": self.metric}
        if self.nprobe:
            params["params"] = {"nprobe": self.nprobe}
        out: list[list[dict[str, Any]]] = []
        for lo in range(0, len(vecs), SEARCH_CHUNK):
            try:
                res = self.client.search(self.collection, data=list(vecs[lo : lo + SEARCH_CHUNK]),
                                         limit=k, output_fields=["pid", "title", "text"],
                                         search_params=params)
            except Exception as e:  # noqa: BLE001 - any pymilvus failure, reported with the URI
                raise RetrievalError(f"Milvus search at {self.uri} failed: {e}") from None
            out.extend(list(r) for r in res)
        return out

    def search_rows(self, queries: list[str], k: int) -> tuple[np.ndarray, np.ndarray]:
        k = min(k, self.count) if self.count else k
        rows = np.full((len(queries), k), -1, np.int64)
        scores = np.zeros((len(queries), k), np.float32)
        if not queries or k <= 0:
            return rows, scores
        for i, hits in enumerate(self.search_vectors(self.encode_queries(queries), k)):
            for j, h in enumerate(hits[:k]):
                rows[i, j], scores[i, j] = int(h["row"]), float(h["distance"])
        return rows, scores

    def search_batch(self, queries: list[str], k: int) -> list[Hits]:
        if not queries or k <= 0:
            return [Hits(q) for q in queries]
        results = self.search_vectors(self.encode_queries(queries), k)
        out = []
        for q, hits in zip(queries, results, strict=True):
            passages = [Passage(h["entity"]["pid"], h["entity"]["title"], h["entity"]["text"])
                        for h in hits]
            out.append(Hits(q, passages, [float(h["distance"]) for h in hits]))
        return out

    def close(self) -> None:
        with contextlib.suppress(Exception):  # closing a dead connection is not an error
            self.client.close()
