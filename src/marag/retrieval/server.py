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

Requests are read the way Search-R1's own server reads them: its pydantic request model in
lax mode, so ``topk`` may be ``"3"`` or ``3.0``, a missing, null or 0 ``topk`` means the
server's default, unknown fields are ignored, an empty query list is answered with an empty
result, and a malformed request gets FastAPI's default 422 body (``{"detail": [{"type",
"loc", "msg", "input"}, ...]}``). A query list may come back with fewer than ``k`` passages:
an index returns only passages that match (BM25: that share a term with the query), and the
response header ``X-Marag-Short-Lists`` counts the queries so answered.

What protects the server stays strict: a body that is not JSON is a 400 (same error shape),
and a body over ``max_body_bytes``, more than ``max_batch`` queries or more than
``max_results`` passages (queries x k) in one request is a 413 whose ``detail`` says which
limit and how to split the request.
"""

from __future__ import annotations

import json
import logging
import math
from typing import Any

from fastapi import FastAPI, Request
from fastapi.encoders import jsonable_encoder
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, ValidationError
from starlette.concurrency import run_in_threadpool

from marag.corpus import source_id
from marag.http.docs import errors
from marag.retrieval.base import Retriever
from marag.retrieval.coalesce import Coalescer
from marag.types import Hits

log = logging.getLogger(__name__)

SEARCH_R1_DEFAULT_TOPK = 3  # Search-R1's launcher default
MMOA_DEFAULT_N = 10  # the MMOA-RAG flask server's default
# Search-R1's standard GRPO run sends train batch 512 x 5 samples = 2,560 queries in one POST
DEFAULT_MAX_BATCH = 8192
DEFAULT_MAX_RESULTS = 100_000  # passages per request (queries x k): ~70 MB of JSON at most
DEFAULT_MAX_BODY = 16 << 20
SHORT_HEADER = "X-Marag-Short-Lists"


class RetrieveRequest(BaseModel):
    """Search-R1's ``QueryRequest``, field for field (lax types, extra fields ignored)."""

    model_config = ConfigDict(extra="ignore")
    queries: list[str]
    topk: int | None = None
    return_scores: bool = False


class SearchRequest(BaseModel):
    """The MMOA-RAG / MAO-ARAG ``/search`` body."""

    model_config = ConfigDict(extra="ignore")
    questions: list[str]
    N: int | None = None


class Document(BaseModel):
    id: int | str
    contents: str


class ScoredDocument(BaseModel):
    document: Document
    score: float


class RetrieveResponse(BaseModel):
    result: list[list[ScoredDocument] | list[Document]]


class SearchResult(BaseModel):
    question: str
    top_k_docs: list[str]


class ErrorDetail(BaseModel):
    """A refused request: a sentence (a limit), or FastAPI's list of field errors."""

    detail: str | list[dict[str, Any]]


def _lax_int(least: int, most: int) -> dict[str, Any]:
    # read as Search-R1's pydantic model reads it: 3, 3.0 and "3" are the same (true is 1);
    # null, false or 0 means the server's default
    digits = f"^[0-9]{{1,{len(str(most)) - 1}}}$" if most >= 10 else f"^[0-{most}]$"
    return {"anyOf": [{"type": "integer", "minimum": least, "maximum": most},
                      {"type": "string", "pattern": digits}, {"type": "boolean"},
                      {"type": "null"}]}


_LAX_BOOL = {"anyOf": [{"type": "boolean"}, {"enum": [0, 1]}, {"type": "string", "enum": [
    "0", "1", "true", "false", "t", "f", "yes", "no", "y", "n", "on", "off"]}]}


def body_docs(fields: dict[str, Any], required: str) -> dict[str, Any]:
    """``openapi_extra`` for a route that reads its JSON body itself."""
    schema = {"type": "object", "required": [required], "properties": fields}
    return {"requestBody": {"required": True,
                            "content": {"application/json": {"schema": schema}}}}


class ServerFailure(RuntimeError):
    """The index failed on a valid request; becomes a 500 the client may retry."""


class BadRequest(ValueError):
    """A request the client must fix. ``detail`` is FastAPI's list of error objects for
    malformed requests, or a sentence for a limit (FastAPI's ``HTTPException`` shape)."""

    def __init__(self, detail: str | list[dict[str, Any]], status: int = 422) -> None:
        super().__init__(detail if isinstance(detail, str) else json.dumps(detail))
        self.detail = detail
        self.status = status


def field_error(field: str, kind: str, msg: str, value: Any, **ctx: Any) -> BadRequest:
    """One FastAPI-shaped validation error about a body field."""
    error: dict[str, Any] = {"type": kind, "loc": ["body", field], "msg": msg, "input": value}
    if ctx:
        error["ctx"] = ctx
    return BadRequest([error])


def validate(model: type[BaseModel], body: Any) -> Any:
    try:
        return model.model_validate(body)
    except ValidationError as e:
        errors = e.errors(include_url=False)
        for err in errors:
            err["loc"] = ["body", *err["loc"]]
        raise BadRequest(jsonable_encoder(errors)) from None


def resolve_topk(value: int | None, field: str, default: int, max_topk: int) -> int:
    """Search-R1 falls back to its default for a missing, null or 0 ``topk``."""
    if not value:
        return default
    if value < 0:
        raise field_error(field, "greater_than_equal", "Input should be greater than or "
                          "equal to 0", value, ge=0)
    if value > max_topk:
        raise field_error(field, "less_than_equal", f"Input should be less than or equal to "
                          f"{max_topk} (this server's --max-topk)", value, le=max_topk)
    return value


def check_size(queries: list[str], field: str, k: int, max_batch: int, max_results: int) -> None:
    if len(queries) > max_batch:
        raise BadRequest(f"{field!r} has {len(queries)} queries; this server accepts at most "
                         f"{max_batch} per request (split the batch, or start the server with a "
                         "larger --max-batch)", status=413)
    if len(queries) * k > max_results:
        raise BadRequest(f"{len(queries)} queries x {k} passages = {len(queries) * k} passages; "
                         f"this server returns at most {max_results} per request (split the "
                         "batch, or start the server with a larger --max-results)", status=413)


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
            if len(hits.passages) > k:
                raise RuntimeError(f"retriever {retriever.name!r} returned {len(hits.passages)} "
                                   f"passages for k={k}")
            # JSON has no NaN/inf: one such score would make the whole response unparsable
            if not all(math.isfinite(s) for s in hits.scores):
                raise RuntimeError(f"retriever {retriever.name!r} returned a non-finite score")
            results[i] = hits
    return results


def retrieve_payload(results: list[Hits], return_scores: bool) -> dict[str, Any]:
    out = []
    for hits in results:
        # id and contents as the corpus record has them (an integer id stays an integer)
        docs = [{"id": source_id(p), "contents": p.contents} for p in hits.passages]
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
    max_batch: int = DEFAULT_MAX_BATCH,
    max_topk: int = 1000,
    max_results: int = DEFAULT_MAX_RESULTS,
    max_body_bytes: int = DEFAULT_MAX_BODY,
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

    async def read_body(request: Request) -> Any:
        declared = request.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > max_body_bytes:
            raise BadRequest(f"request body has {declared} bytes; this server accepts at most "
                             f"{max_body_bytes} (split the batch)", status=413)
        raw = bytearray()
        async for chunk in request.stream():  # a chunked upload has no length to check first
            raw += chunk
            if len(raw) > max_body_bytes:
                raise BadRequest(f"request body exceeds {max_body_bytes} bytes (split the batch)",
                                 status=413)
        try:
            return json.loads(raw)
        except (ValueError, UnicodeDecodeError) as e:
            pos = getattr(e, "pos", 0)
            reason = getattr(e, "msg", None) or str(e)
            raise BadRequest([{"type": "json_invalid", "loc": ["body", pos],
                               "msg": f"JSON decode error: request body is not valid JSON "
                                      f"({reason})", "input": {}, "ctx": {"error": reason}}],
                             status=400) from None

    async def searched(queries: list[str], k: int) -> list[Hits]:
        if not queries:
            return []
        try:
            return await coalescer.submit(queries, k)
        except Exception as e:
            log.exception("retrieval failed for %d queries (k=%d)", len(queries), k)
            raise ServerFailure(f"retrieval failed: {type(e).__name__}: {e}") from e

    def short_lists(results: list[Hits], k: int) -> dict[str, str]:
        return {SHORT_HEADER: str(sum(1 for h in results if len(h.passages) < k))}

    @app.exception_handler(BadRequest)
    async def _bad_request(request: Request, exc: BadRequest) -> JSONResponse:
        return JSONResponse({"detail": exc.detail}, status_code=exc.status)

    @app.exception_handler(ServerFailure)
    async def _failure(request: Request, exc: ServerFailure) -> JSONResponse:
        return JSONResponse({"detail": str(exc)}, status_code=500)

    @app.get("/health")
    async def health() -> dict[str, Any]:
        return {"status": "ok", "kind": index_kind, "passages": passage_count(retriever)}

    limits = errors(ErrorDetail, 400, 413, 422, 500)
    short = {"headers": {SHORT_HEADER: {"schema": {"type": "string"}, "description":
                                        "how many queries got fewer than k passages"}}}
    queries = {"type": "array", "items": {"type": "string"}, "maxItems": max_batch}

    @app.post("/retrieve", response_class=JSONResponse, responses={
        200: {"model": RetrieveResponse, **short}, **limits},
        openapi_extra=body_docs({"queries": queries, "topk": _lax_int(0, max_topk),
                                 "return_scores": _LAX_BOOL}, "queries"))
    async def retrieve(request: Request) -> JSONResponse:
        """Search-R1's endpoint. Each query's list holds at most ``topk`` passages, best
        first, and fewer when fewer match (a query with no matching term gets ``[]``)."""
        req = validate(RetrieveRequest, await read_body(request))
        k = resolve_topk(req.topk, "topk", default_topk, max_topk)
        check_size(req.queries, "queries", k, max_batch, max_results)
        results = await searched(req.queries, k)
        return JSONResponse(retrieve_payload(results, req.return_scores),
                            headers=short_lists(results, k))

    @app.post("/search", response_class=JSONResponse, responses={
        200: {"model": list[SearchResult], **short}, **limits},
        openapi_extra=body_docs({"questions": queries, "N": _lax_int(0, max_topk)},
                                "questions"))
    async def search(request: Request) -> JSONResponse:
        """MMOA-RAG's endpoint; ``top_k_docs`` holds at most ``N`` passages, fewer when
        fewer match."""
        req = validate(SearchRequest, await read_body(request))
        k = resolve_topk(req.N, "N", min(MMOA_DEFAULT_N, max_topk), max_topk)
        check_size(req.questions, "questions", k, max_batch, max_results)
        results = await searched(req.questions, k)
        return JSONResponse(search_payload(results), headers=short_lists(results, k))

    return app


def serve(retriever: Retriever, *, host: str = "127.0.0.1", port: int = 8000, **app_kwargs: Any) -> None:
    """Run the server in the foreground until interrupted."""
    import uvicorn

    uvicorn.run(create_app(retriever, **app_kwargs), host=host, port=port, log_level="info")
