"""Milvus as a retrieval backend, for corpora or worker counts beyond one machine.

``index_to_milvus`` copies a local index into a Milvus collection whose rows are the index's
rows: ``row`` (INT64 primary key = the index row), ``pid``, ``title``, ``text``, and

- from a **dense** index, ``vector`` (its flat vectors, read from the memory-mapped file in
  batches). The query encoder's settings travel in the collection's properties, so
  ``MilvusRetriever`` needs only a URI and a collection name and encodes queries exactly as
  a local index would;
- from a **BM25** index, ``body`` (title and text, as marag's BM25 indexes them) analysed by
  Milvus (``ANALYZER``: bm25s's steps), and ``sparse``, the BM25 vector Milvus' own BM25 function makes
  from it (Milvus 2.5 full-text search), with the index's k1 and b. Queries go in as text;
  a hit's score is the BM25 score (Milvus Lite reports it negated as a distance).
  Milvus tokenises and stems with its own analyzer, not bm25s's, so rankings agree closely
  with the local index but not always exactly (tests/retrieval/test_milvus.py states the
  agreement).

The URI is a Milvus Lite file (``./wiki.db``: the engine embedded in-process, for tests and
laptops) or a Milvus server or cluster (``http://host:19530``, a Zilliz Cloud endpoint);
pymilvus speaks to all of them.
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
KIND_KEY = "marag.kind"  # "bm25" on a BM25 collection (a dense one made before has none)
BM25_KEY = "marag.bm25"  # the local index's BM25 parameters
# bm25s's pipeline in Milvus' terms: words, lower case, English stopwords out, then the
# English (Snowball) stemmer; spelt out because Milvus Lite has no built-in "english" type
ANALYZER = {"tokenizer": "standard",
            "filter": ["lowercase", {"type": "stop", "stop_words": ["_english_"]},
                       {"type": "stemmer", "language": "english"}]}
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
    """Copy a dense or BM25 index into ``collection`` at ``uri``; returns rows, time and
    settings. ``index_type``/``nlist`` choose the dense vector index (a BM25 collection
    always gets Milvus' sparse inverted index)."""
    from marag.retrieval.imported import as_tiered
    from marag.retrieval.manifest import BadIndexError, read_manifest

    d = Path(index_dir)
    manifest = read_manifest(d)
    if manifest["kind"] == "bm25":
        return _bm25_to_milvus(d, manifest, uri, collection, batch, token_env, overwrite, log)
    if manifest["kind"] != "dense":
        raise BadIndexError(f"{d}: dense and BM25 indexes move to Milvus (this one is "
                            f"{manifest['kind']}: move its parts one by one)")
    return _dense_to_milvus(d, as_tiered(d, manifest), uri, collection, index_type, nlist,
                            batch, token_env, overwrite, log)


def _new_collection(client: Any, uri: str, collection: str, overwrite: bool) -> None:
    if client.has_collection(collection):
        if not overwrite:
            raise RetrievalError(f"Milvus collection {collection!r} exists at {uri} "
                                 "(--overwrite drops it first)")
        client.drop_collection(collection)


def _copy_rows(d: Path, manifest: dict[str, Any], client: Any, collection: str, count: int,
               batch: int, row: Callable[[int, Passage], dict[str, Any]],
               log: Callable[[str], None] | None) -> None:
    """Insert the index's passages in batches, ``row(i, passage)`` making each row."""
    from marag.retrieval.manifest import open_store

    store = open_store(d, manifest)
    try:
        for lo in range(0, count, batch):
            hi = min(count, lo + batch)
            rows = []
            for i, p in enumerate(store.get_many(range(lo, hi)), start=lo):
                if len(p.text.encode("utf-8")) > MAX_TEXT:
                    raise RetrievalError(f"{d}: passage {p.id} (row {i}) is longer than "
                                         f"Milvus' {MAX_TEXT}-byte text field")
                rows.append(row(i, p))
            client.insert(collection, rows)
            if log and (hi == count or (lo // batch) % 50 == 0):
                log(f"to-milvus: {hi} of {count} rows")
    finally:
        store.close()
    client.flush(collection)


def _passage_fields(schema: Any) -> None:
    from pymilvus import DataType

    schema.add_field("row", DataType.INT64, is_primary=True)
    schema.add_field("pid", DataType.VARCHAR, max_length=1024)
    schema.add_field("title", DataType.VARCHAR, max_length=4096)
    schema.add_field("text", DataType.VARCHAR, max_length=MAX_TEXT)


def _dense_to_milvus(d: Path, manifest: dict[str, Any], uri: str, collection: str,
                     index_type: str, nlist: int | None, batch: int, token_env: str | None,
                     overwrite: bool, log: Callable[[str], None] | None) -> dict[str, Any]:
    from pymilvus import DataType

    from marag.retrieval.vectors import VectorFile

    vf = VectorFile.from_dict(manifest["vectors"])
    settings = EncoderSettings.from_dict(manifest["query_encoder"])
    t0 = time.perf_counter()
    client = connect(uri, token_env)
    _new_collection(client, uri, collection, overwrite)
    schema = client.create_schema(auto_id=False)
    _passage_fields(schema)
    schema.add_field("vector", DataType.FLOAT_VECTOR, dim=vf.dim)
    params = client.prepare_index_params()
    extra = {"nlist": nlist} if nlist else {}
    params.add_index(field_name="vector", index_type=index_type, metric_type=METRIC[vf.metric],
                     params=extra)
    client.create_collection(collection, schema=schema, index_params=params)
    client.alter_collection_properties(collection, properties={
        SETTINGS_KEY: json.dumps(settings.to_dict()), COUNT_KEY: str(vf.rows)})
    vecs = vf.open()
    _copy_rows(d, manifest, client, collection, vf.rows, batch,
               lambda i, p: {"row": i, "vector": vecs[i], "pid": p.id, "title": p.title[:4096],
                             "text": p.text}, log)
    client.close()
    return {"rows": vf.rows, "seconds": time.perf_counter() - t0, "index_type": index_type,
            "metric": METRIC[vf.metric], "settings": settings.to_dict()}


def _bm25_to_milvus(d: Path, manifest: dict[str, Any], uri: str, collection: str, batch: int,
                    token_env: str | None, overwrite: bool,
                    log: Callable[[str], None] | None) -> dict[str, Any]:
    from pymilvus import DataType, Function, FunctionType

    local = manifest.get("params") or {}
    if local.get("method", "lucene") != "lucene":
        raise RetrievalError(f"{d}: BM25 method {local['method']!r}: Milvus scores with the "
                             "Lucene variant only (build the index with method lucene)")
    params = {"k1": float(local.get("k1", 1.5)), "b": float(local.get("b", 0.75)),
              "method": "lucene"}
    count = int(manifest["count"])
    t0 = time.perf_counter()
    client = connect(uri, token_env)
    _new_collection(client, uri, collection, overwrite)
    schema = client.create_schema(auto_id=False)
    _passage_fields(schema)
    # what BM25 reads: title and text, as marag's BM25 index tokenises them
    schema.add_field("body", DataType.VARCHAR, max_length=MAX_TEXT, enable_analyzer=True,
                     analyzer_params=ANALYZER)
    schema.add_field("sparse", DataType.SPARSE_FLOAT_VECTOR)
    schema.add_function(Function(name="bm25", function_type=FunctionType.BM25,
                                 input_field_names=["body"], output_field_names=["sparse"]))
    index = client.prepare_index_params()
    index.add_index(field_name="sparse", index_type="SPARSE_INVERTED_INDEX", metric_type="BM25",
                    params={"bm25_k1": params["k1"], "bm25_b": params["b"]})
    try:
        client.create_collection(collection, schema=schema, index_params=index)
    except Exception as e:  # noqa: BLE001 - an engine without full-text search
        raise RetrievalError(f"Milvus at {uri} cannot make a BM25 collection (full-text "
                             f"search needs Milvus 2.5 or later): {e}") from None
    client.alter_collection_properties(collection, properties={
        KIND_KEY: "bm25", BM25_KEY: json.dumps(params), COUNT_KEY: str(count)})

    def row(i: int, p: Passage) -> dict[str, Any]:
        body = f"{p.title}\n{p.text}"
        if len(body.encode("utf-8")) > MAX_TEXT:
            body = p.text
        return {"row": i, "pid": p.id, "title": p.title[:4096], "text": p.text, "body": body}

    _copy_rows(d, manifest, client, collection, count, batch, row, log)
    client.close()
    return {"rows": count, "seconds": time.perf_counter() - t0,
            "index_type": "SPARSE_INVERTED_INDEX", "metric": "BM25", "settings": params}


class MilvusRetriever(Retriever):
    """Retrieval from a Milvus collection made by ``index_to_milvus``: dense (queries
    encoded here with the collection's encoder settings) or BM25 (queries sent as text)."""

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
        self.count = int(props.get(COUNT_KEY, 0))
        self.encoder = None
        self.settings: EncoderSettings | None = None
        if props.get(KIND_KEY) == "bm25":
            self.kind, self.metric = "bm25", "BM25"
            self.manifest = {"kind": "bm25", "backend": "milvus", "uri": uri,
                             "collection": collection, "count": self.count,
                             "params": json.loads(props.get(BM25_KEY, "{}"))}
            self.client.load_collection(collection)
            return
        if SETTINGS_KEY not in props:
            raise RetrievalError(f"Milvus collection {collection!r} was not made by marag "
                                 f"(no {SETTINGS_KEY} or {KIND_KEY} property)")
        self.kind = "dense"
        self.settings = EncoderSettings.from_dict(json.loads(props[SETTINGS_KEY]))
        self.manifest = {"kind": "dense", "backend": "milvus", "uri": uri,
                         "collection": collection, "query_encoder": self.settings.to_dict(),
                         "count": self.count}
        self.metric = "IP" if self.settings.metric == "inner_product" else "L2"
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
        if self.kind == "bm25":
            raise RetrievalError(f"Milvus collection {self.collection!r} is a BM25 index: "
                                 "queries go in as text, not vectors")
        if self.encoder is None or self.settings is None:
            raise RetrievalError("MilvusRetriever opened without its encoder")
        vecs = self.encoder.encode([self.settings.query_prefix + q for q in queries],
                                   batch_size=64, normalize_embeddings=self.settings.normalize,
                                   convert_to_numpy=True, show_progress_bar=False)
        return np.ascontiguousarray(vecs, dtype=np.float32)

    def search_vectors(self, vecs: np.ndarray, k: int) -> list[list[dict[str, Any]]]:
        params: dict[str, Any] = {"metric_type": self.metric}
        if self.nprobe:
            params["params"] = {"nprobe": self.nprobe}
        return self._search(list(vecs), k, "vector", params)

    def _search(self, data: list[Any], k: int, field: str, params: dict[str, Any]
                ) -> list[list[dict[str, Any]]]:
        out: list[list[dict[str, Any]]] = []
        for lo in range(0, len(data), SEARCH_CHUNK):
            try:
                res = self.client.search(self.collection, data=data[lo : lo + SEARCH_CHUNK],
                                         anns_field=field, limit=k,
                                         output_fields=["row", "pid", "title", "text"],
                                         search_params=params)
            except Exception as e:  # noqa: BLE001 - any pymilvus failure, reported with the URI
                raise RetrievalError(f"Milvus search at {self.uri} failed: {e}") from None
            out.extend(list(r) for r in res)
        return out

    def _score(self, hit: dict[str, Any]) -> float:
        """Higher is better: the inner product or L2 distance as Milvus gives it; a BM25
        score is never negative, and Milvus Lite hands it over negated."""
        d = float(hit["distance"])
        return abs(d) if self.kind == "bm25" else d

    def search_queries(self, queries: list[str], k: int) -> list[list[dict[str, Any]]]:
        """Each query's hits, best first: encoded here (dense), or as text (BM25; a query
        Milvus' analyzer leaves no term of, e.g. only stopwords, has no hits)."""
        if self.kind != "bm25":
            return self.search_vectors(self.encode_queries(queries), k)
        out: list[list[dict[str, Any]]] = [[] for _ in queries]
        live = [i for i, q in enumerate(queries) if q.strip()]
        found = self._search([queries[i] for i in live], k, "sparse", {"metric_type": "BM25"})
        for i, hits in zip(live, found, strict=True):
            out[i] = hits
        return out

    def search_rows(self, queries: list[str], k: int) -> tuple[np.ndarray, np.ndarray]:
        k = min(k, self.count) if self.count else k
        rows = np.full((len(queries), k), -1, np.int64)
        scores = np.zeros((len(queries), k), np.float32)
        if not queries or k <= 0:
            return rows, scores
        for i, hits in enumerate(self.search_queries(queries, k)):
            for j, h in enumerate(hits[:k]):
                rows[i, j], scores[i, j] = int(h["entity"]["row"]), self._score(h)
        return rows, scores

    def search_batch(self, queries: list[str], k: int) -> list[Hits]:
        if not queries or k <= 0:
            return [Hits(q) for q in queries]
        results = self.search_queries(queries, k)
        out = []
        for q, hits in zip(queries, results, strict=True):
            passages = [Passage(h["entity"]["pid"], h["entity"]["title"], h["entity"]["text"])
                        for h in hits]
            out.append(Hits(q, passages, [self._score(h) for h in hits]))
        return out

    def close(self) -> None:
        with contextlib.suppress(Exception):  # closing a dead connection is not an error
            self.client.close()
