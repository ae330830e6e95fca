"""The ``marag serve`` FastAPI app: ask questions (whole or streamed) and browse run directories.

The Context (backends and retriever) is built once by the caller and shared by every request;
each question runs as its own task on the server's event loop, so a slow one never holds up
others, and concurrent calls meet in the backend's batcher. Every ``/api`` route needs the
bearer token when one is set; the page and ``/health`` do not (the page asks for the token).
"""

from __future__ import annotations

import asyncio
import hmac
import itertools
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from importlib.resources import files
from typing import Any

from fastapi import APIRouter, Depends, FastAPI, HTTPException, Query, Request
from fastapi.responses import FileResponse, JSONResponse, StreamingResponse
from fastapi.staticfiles import StaticFiles
from pydantic import BaseModel, ConfigDict, Field

from marag.api import ask_async, resolve_config
from marag.config import ConfigError
from marag.eval.rundir import RunDirError
from marag.http.docs import errors, event_stream
from marag.http.limits import BodyLimit
from marag.types import EMPTY_QUESTION, QUESTION_PATTERN, Trace, is_blank
from marag.web.live import LiveQuestion, sse, trace_payload
from marag.web.runs import FILTERS, RunNotFound, RunStore
from marag.web.settings import OVERRIDABLE, ServeSettings, override_pattern
from marag.workflows import METHODS, RETRIEVES, Context

log = logging.getLogger(__name__)


class AskRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    # the blank check is the server's own (422 with the CLI's message); the pattern documents it
    question: str = Field(min_length=1, json_schema_extra={"pattern": QUESTION_PATTERN})
    method: str | None = Field(None, json_schema_extra={"enum": [*METHODS, None]})
    golden_answers: list[str] = Field(default_factory=list, max_length=32)
    overrides: list[str] = Field(default_factory=list, max_length=32, json_schema_extra={
        "items": {"type": "string", "pattern": override_pattern()}})
    id: str | None = Field(None, max_length=200)


class ErrorDetail(BaseModel):
    """Every error this server answers: a sentence, or FastAPI's list of field errors."""

    detail: str | list[dict[str, Any]]


class Server:
    """What the routes share: the context, the settings, the run store, the asks in flight."""

    def __init__(self, ctx: Context, settings: ServeSettings) -> None:
        self.ctx = ctx
        self.settings = settings
        self.store = RunStore(settings.runs)
        self.in_flight = 0
        self.tasks: set[asyncio.Task[Any]] = set()
        self._ids = itertools.count(1)

    def check(self, req: AskRequest) -> tuple[str, Context]:
        """The method name and the context to run ``req`` with; HTTPException when refused."""
        if is_blank(req.question):
            raise HTTPException(422, EMPTY_QUESTION)
        limit = self.settings.max_question_chars
        if len(req.question) > limit:
            raise HTTPException(413, f"question is {len(req.question)} characters; "
                                     f"the limit is {limit}")
        name = req.method or self.ctx.config.method.name
        if name not in METHODS:
            raise HTTPException(422, f"unknown method {name!r}; choose from {sorted(METHODS)}")
        if RETRIEVES[name] and self.ctx.retriever is None:
            raise HTTPException(422, f"method {name!r} retrieves, but this server has no index")
        if not req.overrides:
            return name, self.ctx
        for item in req.overrides:
            key = item.split("=", 1)[0].strip()
            if "=" not in item or not key.startswith(OVERRIDABLE) or key == "method.name":
                raise HTTPException(422, f"override {item!r} refused: only key=value under "
                                         f"{', '.join(OVERRIDABLE)} (not method.name; use "
                                         "'method') can change per request")
        try:
            cfg = resolve_config(self.ctx.config, req.overrides)
        except ConfigError as e:
            raise HTTPException(422, f"config override: {e}") from None
        # a fresh Context: routes and sampling are cached per Context and depend on the config
        return name, Context(llms=self.ctx.llms, config=cfg, retriever=self.ctx.retriever,
                             listeners=self.ctx.listeners)

    def start(self, req: AskRequest, live: LiveQuestion | None = None) -> asyncio.Task[Trace]:
        """Start answering ``req`` in a task of its own; the ask slot frees when it ends."""
        name, ctx = self.check(req)
        if self.in_flight >= self.settings.max_concurrent_asks:
            raise HTTPException(429, f"{self.in_flight} questions are being answered; the limit "
                                     f"is {self.settings.max_concurrent_asks}; retry later")
        if live is not None:
            ctx = ctx.listening(live)
        qid = req.id or f"ask-{next(self._ids)}"
        coro = ask_async(req.question, method=name, context=ctx, id=qid,
                         golden_answers=req.golden_answers)
        task = asyncio.ensure_future(asyncio.wait_for(coro, self.settings.ask_timeout))
        self.in_flight += 1
        self.tasks.add(task)
        task.add_done_callback(self._done)
        return task

    def _done(self, task: asyncio.Task[Any]) -> None:
        self.in_flight -= 1
        self.tasks.discard(task)

    def timeout_detail(self) -> str:
        return f"the question took longer than {self.settings.ask_timeout} s"


def create_app(ctx: Context, settings: ServeSettings | None = None) -> FastAPI:
    """The app around an open ``ctx`` (closed when the app shuts down)."""
    settings = settings or ServeSettings()
    server = Server(ctx, settings)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        try:
            yield
        finally:
            for t in list(server.tasks):
                t.cancel()
            await asyncio.gather(*server.tasks, return_exceptions=True)
            await ctx.aclose()

    app = FastAPI(title="marag", lifespan=lifespan, docs_url=None, redoc_url=None)
    app.state.server = server
    app.add_middleware(BodyLimit, max_bytes=settings.max_body_bytes)
    static = files("marag.web") / "static"

    async def check_token(request: Request) -> None:
        if settings.token is None:
            return
        got = request.headers.get("authorization", "")
        scheme, _, value = got.partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(value.strip().encode(),
                                                                  settings.token.encode()):
            raise HTTPException(401, "missing or wrong bearer token",
                                headers={"WWW-Authenticate": "Bearer"})

    api = APIRouter(prefix="/api", dependencies=[Depends(check_token)],
                    responses=errors(ErrorDetail, 400, 401, 413, 422))
    asking = errors(ErrorDetail, 429)

    @app.exception_handler(RunNotFound)
    async def _not_found(request: Request, exc: RunNotFound) -> JSONResponse:
        return JSONResponse({"detail": str(exc)}, status_code=404)

    @app.exception_handler(RunDirError)
    async def _damaged(request: Request, exc: RunDirError) -> JSONResponse:
        # name the file relative to the runs directory: clients need not learn server paths
        detail = str(exc).replace(f"{server.store.root}/", "")
        return JSONResponse({"detail": detail}, status_code=422)

    @app.get("/", include_in_schema=False)
    async def page() -> FileResponse:
        return FileResponse(str(static / "index.html"), media_type="text/html")

    @app.get("/health")
    async def health() -> dict[str, Any]:
        return {"status": "ok", "asks_in_flight": server.in_flight,
                "tasks": len(asyncio.all_tasks())}

    @api.get("/methods")
    async def methods() -> dict[str, Any]:
        return {"default": ctx.config.method.name, "methods": [
            {"name": m, "retrieves": RETRIEVES[m],
             "available": not RETRIEVES[m] or ctx.retriever is not None} for m in METHODS]}

    @api.post("/ask", responses={**asking, **errors(ErrorDetail, 504)})
    async def ask(req: AskRequest) -> dict[str, Any]:
        task = server.start(req)
        try:
            trace = await task
        except TimeoutError:
            raise HTTPException(504, server.timeout_detail()) from None
        return trace.to_dict()

    @api.post("/ask/stream", response_class=StreamingResponse,
              responses={**asking, **event_stream(
                  "Server-sent events: start, node, step..., then trace (or error)")})
    async def ask_stream(req: AskRequest) -> StreamingResponse:
        live = LiveQuestion()
        task = server.start(req, live)
        task.add_done_callback(lambda t: _finish(live, t, server.timeout_detail()))

        async def events() -> AsyncIterator[bytes]:
            try:
                yield sse("start", {"question": req.question, "method": req.method
                                    or ctx.config.method.name})
                while (item := await live.queue.get()) is not None:
                    yield item
            finally:  # the client went away: stop working on its question
                if not task.done():
                    task.cancel()

        return StreamingResponse(events(), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"})

    missing = errors(ErrorDetail, 404)

    @api.get("/runs")
    def runs() -> dict[str, Any]:
        return {"runs": server.store.listing()}

    @api.get("/runs/{name}", responses=missing)
    def run_info(name: str) -> dict[str, Any]:
        return server.store.info(name)

    @api.get("/runs/{name}/traces", responses=missing)
    def run_traces(name: str, offset: int = Query(0, ge=0),
                   limit: int = Query(50, ge=1, le=settings.max_page),
                   filter: str = Query("all", pattern="^(" + "|".join(FILTERS) + ")$"),
                   q: str = Query("", max_length=500)) -> dict[str, Any]:
        return server.store.traces(name, offset=offset, limit=limit, filter=filter, q=q)

    @api.get("/runs/{name}/traces/{trace_id}", responses=missing)
    def run_trace(name: str, trace_id: str) -> dict[str, Any]:
        return trace_payload(server.store.trace(name, trace_id))

    @api.get("/runs/{name}/plots/{file}", responses=missing)
    def run_plot(name: str, file: str) -> FileResponse:
        return FileResponse(server.store.plot(name, file))

    app.include_router(api)
    plain_openapi = app.openapi

    def openapi() -> dict[str, Any]:  # the limits this server was started with
        spec = plain_openapi()
        ask = spec["components"]["schemas"]["AskRequest"]["properties"]
        ask["question"]["maxLength"] = settings.max_question_chars
        return spec

    app.openapi = openapi  # type: ignore[method-assign]
    app.mount("/static", StaticFiles(directory=str(static)), name="static")
    return app


def _finish(live: LiveQuestion, task: asyncio.Task[Trace], timeout_detail: str) -> None:
    if task.cancelled():
        live.finish("error", {"detail": "cancelled"})
    elif isinstance(task.exception(), TimeoutError):
        live.finish("error", {"detail": timeout_detail})
    elif task.exception() is not None:
        log.error("streamed question failed: %r", task.exception())
        live.finish("error", {"detail": f"{type(task.exception()).__name__}: {task.exception()}"})
    else:
        live.finish("trace", trace_payload(task.result()))
