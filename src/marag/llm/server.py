"""An OpenAI-compatible chat-completions server in front of any marag backend.

``marag serve-llm`` runs it over the ``hf`` backend: concurrent HTTP requests each call
``backend.generate`` on the same event loop, so they meet in the backend's dynamic batcher.
Only what marag's own ``openai`` client and common OpenAI clients need is implemented:
``POST /v1/chat/completions`` (n=1, no streaming) and ``GET /v1/models``.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from marag.llm.base import LLM, LLMError, SamplingParams
from marag.types import Completion

log = logging.getLogger(__name__)

DEFAULT_MAX_TOKENS = 256


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="ignore")
    role: str
    content: str


class ChatRequest(BaseModel):
    # OpenAI clients send many optional fields (user, penalties...); unknown ones are ignored
    model_config = ConfigDict(extra="ignore")
    model: str | None = None
    messages: list[ChatMessage] = Field(min_length=1)
    temperature: float = Field(1.0, ge=0.0, le=2.0)
    top_p: float = Field(1.0, gt=0.0, le=1.0)
    max_tokens: int | None = Field(None, ge=1)
    max_completion_tokens: int | None = Field(None, ge=1)
    stop: str | list[str] | None = None
    seed: int | None = None
    logprobs: bool = False
    # vLLM's extension: name logprob tokens "token_id:<id>" instead of their text
    return_tokens_as_token_ids: bool = False
    n: int = 1
    stream: bool = False


def _error(status: int, message: str, kind: str = "invalid_request_error") -> JSONResponse:
    return JSONResponse(status_code=status, content={"error": {"message": message, "type": kind}})


def _params(req: ChatRequest) -> SamplingParams:
    stop = (req.stop,) if isinstance(req.stop, str) else tuple(req.stop or ())
    return SamplingParams(
        temperature=req.temperature,
        top_p=req.top_p,
        max_tokens=req.max_completion_tokens or req.max_tokens or DEFAULT_MAX_TOKENS,
        stop=stop,
        seed=req.seed,
        logprobs=req.logprobs,
    )


def _logprob_content(backend: LLM, c: Completion, as_ids: bool) -> list[dict[str, Any]]:
    tokenizer = getattr(backend, "tokenizer", None)
    ids = c.token_ids or []
    out = []
    for i, lp in enumerate(c.logprobs or []):
        if as_ids and i < len(ids):
            token = f"token_id:{ids[i]}"
        else:
            token = tokenizer.decode([ids[i]]) if tokenizer is not None and i < len(ids) else ""
        out.append({"token": token, "logprob": lp, "bytes": list(token.encode("utf-8")),
                    "top_logprobs": []})
    return out


def create_app(backend: LLM) -> FastAPI:
    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        yield
        await backend.aclose()

    app = FastAPI(title="marag LLM server", version="1", lifespan=lifespan)

    @app.exception_handler(RequestValidationError)
    async def _bad_request(_: Request, exc: RequestValidationError) -> JSONResponse:
        parts = []
        for e in exc.errors():
            loc = ".".join(str(x) for x in e.get("loc", ()) if x != "body")
            parts.append(f"{loc}: {e.get('msg')}" if loc else str(e.get("msg")))
        return _error(400, "; ".join(parts) or "invalid request")

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        return {"object": "list", "data": [{"id": backend.model, "object": "model",
                                            "created": 0, "owned_by": "marag"}]}

    @app.get("/health")
    async def health() -> dict[str, str]:
        return {"status": "ok", "model": backend.model}

    @app.post("/v1/chat/completions")
    async def chat(req: ChatRequest) -> Any:
        if req.n != 1:
            return _error(400, f"n={req.n} is not supported; only n=1")
        if req.stream:
            return _error(400, "stream=true is not supported")
        if req.model and req.model != backend.model:
            return _error(404, f"model {req.model!r} is not served here; "
                               f"this server has {backend.model!r}", "model_not_found")
        messages = [{"role": m.role, "content": m.content} for m in req.messages]
        try:
            [c] = await backend.generate([messages], _params(req))
        except LLMError as e:
            return _error(400, str(e))
        choice: dict[str, Any] = {
            "index": 0,
            "message": {"role": "assistant", "content": c.text},
            "finish_reason": c.finish_reason,
            "logprobs": ({"content": _logprob_content(backend, c, req.return_tokens_as_token_ids)}
                         if req.logprobs else None),
        }
        return {
            "id": f"chatcmpl-{uuid.uuid4().hex}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": backend.model,
            "choices": [choice],
            "usage": {"prompt_tokens": c.prompt_tokens,
                      "completion_tokens": c.completion_tokens,
                      "total_tokens": c.prompt_tokens + c.completion_tokens},
        }

    return app
