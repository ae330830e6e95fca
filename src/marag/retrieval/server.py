"""HTTP retrieval server over any ``Retriever``.

Two batch endpoints speak the wire formats that existing agent code already uses, so marag can
stand in for their retrieval servers unchanged:

- ``POST /retrieve`` - Search-R1 / verl search tool:
  ``{"queries": [...], "topk": k, "return_scores": bool}`` ->
  ``{"result": [[{"document": {"id", "contents"}, "score"}, ...], ...]}`` with scores, or
  ``{"result": [[{"id", "contents"}, ...], ...]}`` (bare documents) without.
- ``POST /search`` - the MMOA-RAG / MAO-ARAG flask server:
  ``{"questions": [...], "N": k}`` -> ``[{"question", "top_k_docs": ["title\\ntext", ...]}, ...]``.
- ``GET /health`` -> ``{"status", "kind", "passages"}``.

Requests are validated by hand rather than by pydantic models so every bad request gets a 4xx
whose ``detail`` names the offending field in plain words (and a body that is not JSON is a 400,
not a 422 about "json_invalid").
"""

from __future__ import annotations

import json
import logging
import math
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool

from marag.retrieval.base import Retriever
from marag.retrieval.coalesce import Coalescer
from marag.types import Hits

log = logging.getLogger(__name__)

SEARCH_R1_DEFAULT_TOPK = 3  # Search-R1's launcher default
MMOA_DEFAULT_N = 10  # the MMOA-RAG flask server's default


class ServerFailure(RuntimeError):
    """The index failed on a valid request; becomes a 500 the client may retry."""


class BadRequest(ValueError):
    """A request the client must fix; becomes a 4xx whose detail is the message."""

    def __init__(self, message: str, status: int = 422) -> None:
        super().__init__(message)
        self.status = status


def parse_queries(body: dict[str, Any], field: str, max_batch: int) -> list[str]:
    if field not in body:
        raise BadRequest(f"missing field {field!r} (a list of strings)")
    queries = body[field]
    if not isinstance(queries, list):
        raise BadRequest(f"{field!r} must be a list of strings, got {type(queries).__name__}")
    if not queries:
        raise BadRequest(f"{field!r} is empty: send at least one query")
    if len(queries) > max_batch:
        raise BadRequest(
            f"{field!r} has {len(queries)} queries; this server accepts at most {max_batch} "
            "per request (split the batch)",
            status=413,
        )
    for i, q in enumerate(queries):
        if not isinstance(q, str):
            raise BadRequest(f"{field}[{i}] must be a string, got {type(q).__name__}")
    return queries


def parse_topk(body: dict[str, Any], field: str, default: int, max_topk: int) -> int:
    value = body.get(field)
    if value is None:
        return default
    # bool is an int subclass; "topk": true is a client bug, not 1
    if isinstance(value, bool) or not isinstance(value, int):
        raise BadRequest(f"{field!r} must be an integer, got {type(value).__name__}")
    if value <= 0 or value > max_topk:
        raise BadRequest(f"{field!r} must be between 1 and {max_topk}, got {value}")
    return value


def parse_flag(body: dict[str, Any], field: str) -> bool:
    value = body.get(field, False)
    if value is None:
        return False
    if not isinstance(value, bool):
        raise BadRequest(f"{field!r} must be true or false, got {type(value).__name__}")
    return value


def check_fields(body: dict[str, Any], allowed: set[str]) -> None:
    unknown = sorted(set(body) - allowed)
    if unknown:
        raise BadRequest(f"unknown field(s) {unknown}; expected some of {sorted(allowed)}")


def run_search(retriever: Retriever, queries: list[str], k: int) -> list[Hits]:
    """One ``search_batch`` call for the whole batch; blank queries get no hits without
    reaching the index (agents do emit ``<search></search>``)."""
    wanted = [i for i, q in enumerate(queries) if q.strip()]
    results = [Hits(query=q) for q in queries]
    if wanted:
        found = retriever.search_batch([queries[i] for i in wanted], k)
        if len(found) != len(wanted):
            raise RuntimeError(
                f"retriever {retriever.name!r} returned {len(found)} results for {len(wanted)} queries"
            )
        for i, hits in zip(wanted, found):
            if len(hits.scores) != len(hits.passages):
                raise RuntimeError(
                    f"retriever {retriever.name!r} returned {len(hits.passages)} passages "
                    f"but {len(hits.scores)} scores for query {queries[i]!r}"
                )
            # JSON has no NaN/inf: one such score would make the whole response unparsable
            if not all(math.isfinite(s) for s in hits.scores):
                raise RuntimeError(f"retriever {retriever.name!r} returned a non-finite score")
            results[i] = hits
    return results


def retrieve_payload(results: list[Hits], return_scores: bool) -> dict[str, Any]:
    out = []
    for hits in results:
        docs = [{"id": p.id, "contents": p.contents} for p in hits.passages]
        if return_scores:
            out.append([{"document": d, "score": float(s)} for d, s in zip(docs, hits.scores)])
        else:
            out.append(docs)
    return {"result": out}


def search_payload(results: list[Hits]) -> list[dict[str, Any]]:
    return [
        {"question": h.query, "top_k_docs": [f"{p.title}\n{p.text}" for p in h.passages]}
        for h in results
    ]


def passage_count(retriever: Retriever) -> int | None:
    for attr in ("num_passages", "size"):
        n = getattr(retriever, attr, None)
        if isinstance(n, int):
            return n
    try:
        return len(retriever)  # type: ignore[arg-type]
    except TypeError:
        return None


def create_app(
    retriever: Retriever,
    *,
    max_batch: int = 1024,
    max_topk: int = 1000,
    default_topk: int = SEARCH_R1_DEFAULT_TOPK,
    concurrency: int = 4,
    kind: str | None = None,
) -> FastAPI:
    """Build the app. At most ``concurrency`` searches run at once, in worker threads
    (retrieval is CPU- or memory-bound, so more threads only add contention); requests arriving
    while all are busy are merged into shared ``search_batch`` calls (see ``coalesce``)."""
    app = FastAPI(title="marag retrieval server")
    async def in_thread(queries: list[str], k: int) -> list[Hits]:
        return await run_in_threadpool(run_search, retriever, queries, k)

    coalescer = Coalescer(in_thread, concurrency=concurrency, max_batch=max_batch)
    app.state.coalescer = coalescer
    index_kind = kind or getattr(retriever, "kind", None) or retriever.name

    async def read_body(request: Request) -> dict[str, Any]:
        raw = await request.body()
        try:
            body = json.loads(raw)
        except (ValueError, UnicodeDecodeError) as e:
            raise BadRequest(f"request body is not valid JSON ({e})", status=400) from None
        if not isinstance(body, dict):
            raise BadRequest(f"request body must be a JSON object, got {type(body).__name__}", 400)
        return body

    async def searched(queries: list[str], k: int) -> list[Hits]:
        try:
            return await coalescer.submit(queries, k)
        except Exception as e:
            log.exception("retrieval failed for %d queries (k=%d)", len(queries), k)
            raise ServerFailure(f"retrieval failed: {type(e).__name__}: {e}") from e

    @app.exception_handler(BadRequest)
    async def _bad_request(request: Request, exc: BadRequest) -> JSONResponse:
        return JSONResponse({"detail": str(exc)}, status_code=exc.status)

    @app.exception_handler(ServerFailure)
    async def _failure(request: Request, exc: ServerFailure) -> JSONResponse:
        return JSONResponse({"detail": str(exc)}, status_code=500)

    @app.get("/health")
    async def health() -> dict[str, Any]:
        return {"status": "ok", "kind": index_kind, "passages": passage_count(retriever)}

    @app.post("/retrieve")
    async def retrieve(request: Request) -> JSONResponse:
        body = await read_body(request)
        queries = parse_queries(body, "queries", max_batch)
        check_fields(body, {"queries", "topk", "return_scores"})
        k = parse_topk(body, "topk", default_topk, max_topk)
        with_scores = parse_flag(body, "return_scores")
        results = await searched(queries, k)
        return JSONResponse(retrieve_payload(results, with_scores))

    @app.post("/search")
    async def search(request: Request) -> JSONResponse:
        body = await read_body(request)
        questions = parse_queries(body, "questions", max_batch)
        check_fields(body, {"questions", "N"})
        k = parse_topk(body, "N", min(MMOA_DEFAULT_N, max_topk), max_topk)
        results = await searched(questions, k)
        return JSONResponse(search_payload(results))

    return app


def serve(retriever: Retriever, *, host: str = "127.0.0.1", port: int = 8000, **app_kwargs: Any) -> None:
    """Run the server in the foreground until interrupted."""
    import uvicorn

    uvicorn.run(create_app(retriever, **app_kwargs), host=host, port=port, log_level="info")
