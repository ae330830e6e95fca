"""An OpenAI-compatible server in front of the ``hf`` backend (``marag serve-llm``).

Concurrent HTTP requests meet in the backend's dynamic batcher. Endpoints:
``POST /v1/chat/completions`` and ``POST /v1/completions`` (plain or server-sent-event
streaming in OpenAI's chunk format, usage in a last chunk when
``stream_options.include_usage``), ``GET /v1/models``, ``GET /v1/models/{id}`` and
``GET /health``. The model answers to every ``served_names`` alias.

With ``allow_lora_updates`` (``marag serve-llm --allow-lora-updates``, vLLM's
``VLLM_ALLOW_RUNTIME_LORA_UPDATING``) it also takes vLLM's ``POST /v1/load_lora_adapter``
(``{"lora_name", "lora_path", "load_inplace"}``) and ``POST /v1/unload_lora_adapter``
(``{"lora_name"}``): a loaded peft adapter folder is served under its ``lora_name`` as one
more model (``marag.llm.adapters``); a trainer reloads it in place after every update.
Requests that set ``return_token_ids`` get vLLM's ``prompt_token_ids`` and ``token_ids``.

A request whose client disconnects is cancelled: its row leaves the decode batch at the next
step, streamed or not. Every error is OpenAI's ``{"error": {"message", "type", "param",
"code"}}``, unknown paths included. What the backend cannot do is a 400 naming the option
(tools, response_format, n > 1, penalties, logit_bias, echo, suffix, best_of), never silently
ignored; the README has the full table of supported, rejected and ignored options.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Annotated, Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse, StreamingResponse
from pydantic import (AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field,
                      NonNegativeInt)
from starlette.exceptions import HTTPException as StarletteHTTPException

from marag.http.docs import SSE_EVENT, Responses, errors
from marag.llm.base import LLMError, PromptError, SamplingParams, first_stop
from marag.llm.hf_local import TokenStep
from marag.types import Completion

if TYPE_CHECKING:
    from marag.llm.hf_local import HFBackend

log = logging.getLogger(__name__)

# a request body past this is a 413 before it is read whole (2,560 prompts of 8 kB fit)
DEFAULT_MAX_BODY_BYTES = 64 << 20
DEFAULT_MAX_TOKENS = 256  # chat requests that name no max_tokens (clamped to the context)
COMPLETIONS_DEFAULT_MAX_TOKENS = 16  # OpenAI's default for /v1/completions
ROLES = ("system", "developer", "user", "assistant")


class ApiError(Exception):
    """Becomes an OpenAI-shaped error response."""

    def __init__(self, status: int, message: str, param: str | None = None,
                 kind: str = "invalid_request_error", code: str | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.param, self.kind, self.code = (
            status, message, param, kind, code)


def error_body(message: str, kind: str = "invalid_request_error", param: str | None = None,
               code: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


def _error(status: int, message: str, kind: str = "invalid_request_error",
           param: str | None = None, code: str | None = None) -> JSONResponse:
    return JSONResponse(status_code=status, content=error_body(message, kind, param, code))


# ----------------------------------------------------------------------------- requests


class ErrorInfo(BaseModel):
    message: str
    type: str
    param: str | None
    code: str | None


class ErrorResponse(BaseModel):
    """OpenAI's (and vLLM's) error body."""

    error: ErrorInfo


# Request fields take the JSON types their schema names (strict: "3" is not 3, true is not
# 1), so /openapi.json is exactly what is accepted; unknown fields are ignored as OpenAI does.
STRICT = ConfigDict(extra="ignore", strict=True)


def _whole(value: Any) -> Any:
    # JSON Schema's "integer" takes 4.0 (a number with no fraction): so does this server
    return int(value) if isinstance(value, float) and value.is_integer() else value


def _seed(value: int) -> int:
    # torch's generator takes a seed modulo 2**64 (a negative one too: -5 draws as 2**64 - 5)
    return value % 2**64


Int = Annotated[int, BeforeValidator(_whole)]
# (the limits before the validator, so that they show in the JSON schema as minimum/maximum).
# Every integer bound lies within +-2**53, where a double is exact: FastAPI's OpenAPI model
# writes minimum/maximum as floats (a maximum of 2**64 - 1 was published as 2**64, and
# Schemathesis sent 2**64 + 383 as valid), and validators may compare as doubles too.
PositiveInt = Annotated[int, Field(ge=1), BeforeValidator(_whole)]
TopN = Annotated[int, Field(ge=0, le=20), BeforeValidator(_whole)]
# any integer, taken modulo 2**64 as torch takes a seed (so seeds from -2**63 to 2**64 - 1 draw
# exactly as torch.Generator.manual_seed(seed) does), with no bound to publish
Seed = Annotated[int, BeforeValidator(_whole), AfterValidator(_seed)]


class StreamOptions(BaseModel):
    model_config = STRICT
    include_usage: bool = False


# The request models say in their JSON schema (``json_schema_extra``) what ``check_*`` and
# ``chat_messages`` refuse with OpenAI's messages, so /openapi.json shows the real limits.
TEXT_PART = {"type": "object", "required": ["type", "text"],
             "properties": {"type": {"enum": ["text"]}, "text": {"type": "string"}}}
NOTHING = {"maxItems": 0}  # a list this server takes only empty
OFF = {"enum": [0, 0.0, None]}  # an option this server takes only switched off


class ChatMessage(BaseModel):
    # only an assistant message may leave its content out (or null)
    model_config = ConfigDict(extra="ignore", strict=True, json_schema_extra={"allOf": [{
        "if": {"properties": {"role": {"const": "assistant"}}},
        "else": {"required": ["content"],
                 "properties": {"content": {"type": ["string", "array"]}}}}]})
    role: str = Field(json_schema_extra={"enum": list(ROLES)})
    content: str | list[dict[str, Any]] | None = Field(None, json_schema_extra={
        "anyOf": [{"type": "string"}, {"type": "array", "items": TEXT_PART}, {"type": "null"}]})
    tool_calls: list[Any] | None = Field(None, json_schema_extra=NOTHING)


class _Common(BaseModel):
    # OpenAI clients send optional fields this server has no use for (user, metadata,
    # store...): they are ignored; the ones that would change the output are checked below
    model_config = STRICT
    model: str | None = None
    temperature: float | None = Field(None, ge=0.0, le=2.0)
    top_p: float | None = Field(None, gt=0.0, le=1.0)
    stop: str | list[str] | None = None
    seed: Seed | None = Field(None, description="Any integer; sampling uses it modulo 2^64, "
                              "as a torch generator takes a seed.")
    n: PositiveInt | None = Field(None, json_schema_extra={"maximum": 1})
    stream: bool | None = False
    stream_options: StreamOptions | None = None
    presence_penalty: float | None = Field(None, json_schema_extra=OFF)
    frequency_penalty: float | None = Field(None, json_schema_extra=OFF)
    logit_bias: dict[str, float] | None = Field(None, json_schema_extra={"maxProperties": 0})
    # vLLM's extension: name logprob tokens "token_id:<id>" instead of their text
    return_tokens_as_token_ids: bool = False
    # vLLM's extension: the prompt's and the completion's token ids in the response
    return_token_ids: bool = False
    # vLLM's extension: end of text and stop strings do not end the reply before this many
    min_tokens: NonNegativeInt = Field(0, description="vLLM's extension: end of text and stop "
                                       "strings do not end the reply before this many tokens "
                                       "(at most max_tokens: a larger value means max_tokens).")


class ChatRequest(_Common):
    model_config = ConfigDict(extra="ignore", strict=True, json_schema_extra={"allOf": [{
        "if": {"required": ["top_logprobs"],
               "properties": {"top_logprobs": {"type": "integer", "minimum": 1}}},
        "then": {"required": ["logprobs"], "properties": {"logprobs": {"const": True}}}}]})
    messages: list[ChatMessage] = Field(min_length=1)
    max_tokens: PositiveInt | None = None
    max_completion_tokens: PositiveInt | None = None
    logprobs: bool | None = False
    top_logprobs: TopN | None = None
    tools: list[Any] | None = Field(None, json_schema_extra=NOTHING)
    tool_choice: Any = Field(None, json_schema_extra={"enum": ["none", None]})
    functions: list[Any] | None = Field(None, json_schema_extra=NOTHING)
    function_call: Any = Field(None, json_schema_extra={"enum": ["none", None]})
    response_format: dict[str, Any] | None = Field(None, json_schema_extra={
        "properties": {"type": {"enum": ["text"]}}})


class LoadLoraRequest(BaseModel):
    model_config = STRICT
    lora_name: str = Field(json_schema_extra={"minLength": 1})
    lora_path: str
    load_inplace: bool = False


class UnloadLoraRequest(BaseModel):
    model_config = STRICT
    lora_name: str
    lora_int_id: Int | None = None


class CompletionRequest(_Common):
    model_config = ConfigDict(extra="ignore", strict=True, json_schema_extra={"allOf": [{
        "if": {"required": ["stream"], "properties": {"stream": {"const": True}}},
        "then": {"properties": {"prompt": {"anyOf": [
            {"type": "string"}, {"type": "array", "maxItems": 1}]}}}}]})
    # token-id prompts parse (OpenAI's schema has them) but are refused; one prompt per request
    # when streaming (not expressible here: a 400 that says so)
    prompt: str | list[str] | list[int] | list[list[int]] = Field(json_schema_extra={
        "anyOf": [{"type": "string", "minLength": 1},
                  {"type": "array", "items": {"type": "string", "minLength": 1},
                   "minItems": 1}]})
    max_tokens: PositiveInt | None = None
    logprobs: TopN | None = None
    echo: bool | None = Field(False, json_schema_extra={"enum": [False, None]})
    suffix: str | None = Field(None, json_schema_extra={"maxLength": 0})
    best_of: Int | None = Field(None, json_schema_extra={"enum": [0, 1, None]})


def check_common(req: _Common) -> None:
    """400 for options that would change the output but that this server does not do."""
    if (req.n or 1) != 1:
        raise ApiError(400, f"n={req.n} is not supported; this server returns one choice", "n")
    for name in ("presence_penalty", "frequency_penalty"):
        if getattr(req, name):
            raise ApiError(400, f"{name} is not supported (send 0 or leave it out)", name)
    if req.logit_bias:
        raise ApiError(400, "logit_bias is not supported", "logit_bias")


def check_chat(req: ChatRequest) -> None:
    check_common(req)
    if req.tools or req.functions:
        name = "tools" if req.tools else "functions"
        raise ApiError(400, "tool calling is not supported by this server", name)
    for name in ("tool_choice", "function_call"):
        value = getattr(req, name)
        if value is not None and value != "none":
            raise ApiError(400, "tool calling is not supported by this server", name)
    fmt = (req.response_format or {}).get("type", "text")
    if fmt != "text":
        raise ApiError(400, f"response_format {fmt!r} is not supported; only 'text'",
                       "response_format")
    if req.top_logprobs and not req.logprobs:
        raise ApiError(400, "top_logprobs needs logprobs=true", "top_logprobs")


def check_completion(req: CompletionRequest) -> None:
    check_common(req)
    if req.echo:
        raise ApiError(400, "echo is not supported", "echo")
    if req.suffix:
        raise ApiError(400, "suffix is not supported", "suffix")
    if (req.best_of or 1) != 1:
        raise ApiError(400, "best_of is not supported", "best_of")


def chat_messages(messages: list[ChatMessage]) -> list[dict[str, str]]:
    """OpenAI messages as the chat template takes them: text only, known roles only."""
    out = []
    for i, m in enumerate(messages):
        if m.role not in ROLES:
            hint = " (tool calling is not supported)" if m.role in ("tool", "function") else ""
            raise ApiError(400, f"messages[{i}].role {m.role!r} is not supported; use "
                           f"{', '.join(ROLES)}{hint}", f"messages[{i}].role")
        if m.tool_calls:
            raise ApiError(400, "tool calling is not supported by this server",
                           f"messages[{i}].tool_calls")
        if m.content is None:
            if m.role != "assistant":
                raise ApiError(400, f"messages[{i}].content is null; only an assistant message "
                               "may omit its content", f"messages[{i}].content")
            text = ""
        elif isinstance(m.content, str):
            text = m.content
        else:
            parts = []
            for j, part in enumerate(m.content):
                if part.get("type") != "text" or not isinstance(part.get("text"), str):
                    raise ApiError(400, f"messages[{i}].content[{j}]: only text parts are "
                                   f"supported, got type {part.get('type')!r}",
                                   f"messages[{i}].content")
                parts.append(part["text"])
            text = "\n".join(parts)  # as vLLM joins text parts
        # the developer role is OpenAI's newer name for system; templates know only system
        out.append({"role": "system" if m.role == "developer" else m.role, "content": text})
    return out


def stops(req: _Common) -> tuple[str, ...]:
    return (req.stop,) if isinstance(req.stop, str) else tuple(req.stop or ())


# ----------------------------------------------------------------------------- streaming text


def safe_text(text: str, stop: tuple[str, ...], start: int = 0) -> str:
    """The part of a partial decode that the final text will certainly start with.

    Held back: everything from a stop string on, a tail that may begin a stop string, an
    unfinished UTF-8 character (decoded as U+FFFD) and trailing whitespace (a tokenizer's
    clean-up may drop a space before punctuation once the next token arrives). A stop string
    that ends at or before ``start`` (the length of the first ``min_tokens`` tokens' text)
    does not count, as in the decoder.
    """
    cut = first_stop(text, stop, start)
    cut = len(text) if cut < 0 else cut
    # what may still change goes first, so that a stop string's beginning just before it
    # (``"xP "`` then ``"."`` cleaned up to ``"xP."``; ``"ab\ufffd"`` then ``"abé"``) is held
    text = text[:cut].rstrip("\ufffd").rstrip()
    hold = 0
    for s in stop:
        for n in range(min(len(s) - 1, len(text)), hold, -1):
            if text.endswith(s[:n]):
                hold = n
                break
    text = text[: len(text) - hold]
    return text.rstrip("\ufffd").rstrip()


class TextStream:
    """Turns a growing list of token ids into text deltas whose sum is the final text."""

    def __init__(self, tokenizer: Any, stop: tuple[str, ...], min_tokens: int = 0) -> None:
        self.tokenizer, self.stop, self.min_tokens = tokenizer, stop, min_tokens
        self.ids: list[int] = []
        self.sent = ""
        self.start: int | None = None  # the first min_tokens tokens' text length, once known

    def push(self, token_id: int) -> str:
        self.ids.append(token_id)
        text = self.tokenizer.decode(self.ids, skip_special_tokens=True)
        start = 0
        if self.stop and self.min_tokens:
            if self.start is None and len(self.ids) >= self.min_tokens:
                self.start = len(self.tokenizer.decode(self.ids[:self.min_tokens],
                                                       skip_special_tokens=True))
            # until min_tokens tokens have come, the text so far is a lower bound of where stop
            # strings start to count: holding back more than needed is safe, less is not
            start = self.start if self.start is not None else len(text)
        text = safe_text(text, self.stop, start)
        if len(text) <= len(self.sent) or not text.startswith(self.sent):
            return ""
        delta, self.sent = text[len(self.sent):], text
        return delta

    def finish(self, final: str) -> str:
        if not final.startswith(self.sent):  # cannot happen with the hold-backs above
            log.warning("streamed text %r is not a prefix of the final text %r", self.sent, final)
            return ""
        delta, self.sent = final[len(self.sent):], final
        return delta


def sse(payload: dict[str, Any] | str) -> str:
    data = payload if isinstance(payload, str) else json.dumps(payload, ensure_ascii=False)
    return f"data: {data}\n\n"


class EventStream(StreamingResponse):
    """A streaming response that stops its generator as soon as the client disconnects.

    Starlette (ASGI 2.4 servers) notices a gone client only when the next write fails and
    then leaves the generator suspended until garbage collection; here a watcher on
    ``receive`` cancels the stream at once, so the request's ``finally`` cancels its
    generation.
    """

    def __init__(self, content: AsyncIterator[str]) -> None:
        super().__init__(content, media_type="text/event-stream",
                         headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        body = self.body_iterator
        writer = asyncio.ensure_future(self.stream_response(send))
        watcher = asyncio.ensure_future(_disconnected(receive))
        try:
            await asyncio.wait({writer, watcher}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (writer, watcher):
                task.cancel()
            await asyncio.gather(writer, watcher, return_exceptions=True)
            if hasattr(body, "aclose"):
                await body.aclose()
        if writer.done() and not writer.cancelled() and writer.exception() is not None:
            exc = writer.exception()
            if not isinstance(exc, OSError):  # a write to a gone client is not our error
                raise exc  # type: ignore[misc]


async def _disconnected(receive: Callable[[], Awaitable[dict[str, Any]]]) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


class ClientGone(Exception):
    """The client disconnected before its answer was ready."""


async def unless_disconnected(request: Request, work: Awaitable[Any]) -> Any:
    """Await ``work``; if the client disconnects first, cancel it (its rows leave the batch)."""
    task = asyncio.ensure_future(work)
    watcher = asyncio.ensure_future(_disconnected(request.receive))
    try:
        await asyncio.wait({task, watcher}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        watcher.cancel()
        if not task.done():
            task.cancel()
        await asyncio.gather(watcher, return_exceptions=True)
    if task.cancelled() or not task.done():
        await asyncio.gather(task, return_exceptions=True)
        raise ClientGone
    return task.result()


# ----------------------------------------------------------------------------- the app


def create_app(backend: HFBackend, served_names: list[str] | None = None, *,
               default_max_tokens: int = DEFAULT_MAX_TOKENS,
               allow_lora_updates: bool = False,
               max_body_bytes: int = DEFAULT_MAX_BODY_BYTES) -> FastAPI:
    """The app over an ``HFBackend`` (anything with its ``encode``/``stream``/``tokenizer``).

    ``served_names``: the names clients may ask for (the first is the default); the
    backend's own model name when not given. ``allow_lora_updates`` adds the LoRA load and
    unload endpoints (they read any local folder a client names: trusted clients only). A
    body over ``max_body_bytes`` is a 413 (OpenAI's error shape) before it is read whole.
    """
    from marag.http.limits import BodyLimit
    from marag.llm.adapters import AdapterError, AdapterSet

    names = list(dict.fromkeys(served_names or [backend.model]))
    tokenizer = backend.tokenizer
    adapters = AdapterSet(backend, names)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        yield
        await adapters.aclose()
        await backend.aclose()

    app = FastAPI(title="marag LLM server", version="1", lifespan=lifespan)
    app.state.adapters = adapters  # the loaded LoRA adapters, for inspection
    app.add_middleware(BodyLimit, max_bytes=max_body_bytes, body=lambda status, message:
                       error_body(message, "invalid_request_error"))

    @app.exception_handler(ApiError)
    async def _api_error(_: Request, exc: ApiError) -> JSONResponse:
        return _error(exc.status, exc.message, exc.kind, exc.param, exc.code)

    @app.exception_handler(ClientGone)
    async def _gone(_: Request, exc: ClientGone) -> JSONResponse:
        # nobody reads this; 499 is what proxies log for a client that closed the request
        return _error(499, "client disconnected; generation cancelled")

    @app.exception_handler(RequestValidationError)
    async def _bad_request(_: Request, exc: RequestValidationError) -> JSONResponse:
        parts, param = [], None
        for e in exc.errors():
            loc = ".".join(str(x) for x in e.get("loc", ()) if x != "body")
            param = param or loc or None
            parts.append(f"{loc}: {e.get('msg')}" if loc else str(e.get("msg")))
        return _error(400, "; ".join(parts) or "invalid request", param=param)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        if exc.status_code in (404, 405):
            message = f"Invalid URL ({request.method} {request.url.path})"
        else:
            message = str(exc.detail)
        kind = "invalid_request_error" if exc.status_code < 500 else "server_error"
        reply = _error(exc.status_code, message, kind)
        reply.headers.update(exc.headers or {})  # a 405 says what is Allowed
        return reply

    def model_card(name: str) -> dict[str, Any]:
        card = {"id": name, "object": "model", "created": 0, "owned_by": "marag"}
        if name in adapters.paths:
            card |= {"root": adapters.paths[name], "parent": names[0]}
        return card

    def all_names() -> list[str]:
        return names + list(adapters.backends)

    def served(requested: str | None) -> tuple[str, HFBackend]:
        """The model a request names (the default when none) and the backend serving it."""
        if requested is None or requested in names:
            return requested or names[0], backend
        lora = adapters.get(requested)
        if lora is not None:
            return requested, lora
        raise ApiError(404, f"The model {requested!r} does not exist; this server serves "
                       f"{', '.join(repr(n) for n in all_names())}", "model",
                       code="model_not_found")

    def budget(prompt_len: int, asked: int | None, default: int) -> int:
        """max_tokens for a prompt: a request past the context is a 400 (as vLLM answers);
        a default is clamped to the room left."""
        ctx = backend.context_length
        if ctx and prompt_len >= ctx:
            raise ApiError(400, f"prompt has {prompt_len} tokens; this model's maximum context "
                           f"length is {ctx} tokens", "messages", code="context_length_exceeded")
        if asked is None:
            return min(default, ctx - prompt_len) if ctx else default
        if ctx and prompt_len + asked > ctx:
            raise ApiError(400, f"This model's maximum context length is {ctx} tokens. However, "
                           f"you requested {prompt_len + asked} tokens ({prompt_len} in the "
                           f"prompt, {asked} in the completion). Reduce the prompt or "
                           "max_tokens.", "max_tokens", code="context_length_exceeded")
        return asked

    def sampling(req: _Common, max_tokens: int, logprobs: bool) -> SamplingParams:
        return SamplingParams(
            temperature=1.0 if req.temperature is None else req.temperature,
            top_p=1.0 if req.top_p is None else req.top_p,
            max_tokens=max_tokens, stop=stops(req), seed=req.seed, logprobs=logprobs,
            min_tokens=min(req.min_tokens, max_tokens))

    def token_text(token_id: int, as_ids: bool) -> str:
        return f"token_id:{token_id}" if as_ids else tokenizer.decode([token_id])

    def chat_logprob(step: TokenStep, as_ids: bool) -> dict[str, Any]:
        def entry(tid: int, lp: float) -> dict[str, Any]:
            text = token_text(tid, as_ids)
            return {"token": text, "logprob": lp, "bytes": list(text.encode("utf-8"))}

        return {**entry(step.token_id, step.logprob),
                "top_logprobs": [entry(t, lp) for t, lp in step.top]}

    def completion_logprobs(steps: list[TokenStep], as_ids: bool, offset: int) -> dict[str, Any]:
        tokens = [token_text(s.token_id, as_ids) for s in steps]
        offsets = []
        for t in tokens:
            offsets.append(offset)
            offset += len(t)
        return {"tokens": tokens, "token_logprobs": [s.logprob for s in steps],
                "top_logprobs": [{token_text(t, as_ids): lp for t, lp in s.top} for s in steps],
                "text_offset": offsets}

    def usage(c: Completion) -> dict[str, int]:
        return {"prompt_tokens": c.prompt_tokens, "completion_tokens": c.completion_tokens,
                "total_tokens": c.prompt_tokens + c.completion_tokens}

    async def collect(events: AsyncIterator[TokenStep | Completion]
                      ) -> tuple[list[TokenStep], Completion]:
        steps: list[TokenStep] = []
        async for item in events:
            if isinstance(item, TokenStep):
                steps.append(item)
            else:
                return steps, item
        raise LLMError("the backend ended a request without a result")

    def generation_failed(e: LLMError) -> ApiError:
        if isinstance(e, PromptError):  # this request's own prompt: the client's to fix
            return ApiError(400, str(e), "prompt")
        return ApiError(500, str(e), kind="server_error")

    def stream_events(events: AsyncIterator[TokenStep | Completion], params: SamplingParams,
                      head: dict[str, Any], choice: Callable[..., dict[str, Any]],
                      lp_of: Callable[[list[TokenStep], int], Any] | None,
                      include_usage: bool) -> AsyncIterator[str]:
        """SSE lines: text deltas as tokens arrive, then the finish reason, usage, [DONE]."""

        async def gen() -> AsyncIterator[str]:
            def chunk(**fields: Any) -> str:
                body = {**head, "choices": [choice(**fields)]}
                if include_usage:
                    body["usage"] = None
                return sse(body)

            text = TextStream(tokenizer, params.stop, params.min_tokens)
            pending: list[TokenStep] = []
            offset = 0
            try:
                yield chunk(first=True)
                async for item in events:
                    if isinstance(item, TokenStep):
                        pending.append(item)
                        delta = text.push(item.token_id)
                        if delta:
                            yield chunk(text=delta, logprobs=lp_of(pending, offset)
                                        if lp_of else None)
                            offset += len(delta)
                            pending = []
                        continue
                    rest = text.finish(item.text)
                    if rest or pending:
                        yield chunk(text=rest, logprobs=lp_of(pending, offset) if lp_of else None)
                    yield chunk(finish=item.finish_reason)
                    if include_usage:
                        yield sse({**head, "choices": [], "usage": usage(item)})
                    break
            except LLMError as e:
                log.warning("streamed request failed: %s", e)
                yield sse(error_body(str(e), "server_error"))
            finally:
                await events.aclose()  # type: ignore[attr-defined]
            yield sse("[DONE]")

        return gen()

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        return {"object": "list", "data": [model_card(n) for n in all_names()]}

    generating: Responses = {
        200: {"description": "The completion; with stream=true, server-sent events (chunks, "
                             "then data: [DONE])",
              "content": {"text/event-stream": {"schema": SSE_EVENT}}},
        **errors(ErrorResponse, 400, 404, 413, 500)}

    @app.get("/v1/models/{model_id:path}", responses=errors(ErrorResponse, 404))
    async def model(model_id: str) -> dict[str, Any]:
        if model_id not in all_names():
            raise ApiError(404, f"The model {model_id!r} does not exist", "model",
                           code="model_not_found")
        return model_card(model_id)

    @app.get("/health")
    async def health() -> dict[str, Any]:
        return {"status": "ok", "model": names[0], "served_names": all_names()}

    if allow_lora_updates:
        lora_docs: Responses = {200: {"content": {"text/plain": {"schema": {"type": "string"}}},
                                      "description": "Done"},
                                **errors(ErrorResponse, 400, 404, 413)}

        @app.post("/v1/load_lora_adapter", response_class=PlainTextResponse, responses=lora_docs)
        async def load_lora(req: LoadLoraRequest) -> PlainTextResponse:
            try:
                await adapters.load(req.lora_name, req.lora_path, req.load_inplace)
            except AdapterError as e:
                raise ApiError(e.status, str(e), "lora_path") from None
            verb = "reloaded" if req.load_inplace else "added"
            return PlainTextResponse(f"Success: LoRA adapter '{req.lora_name}' {verb} "
                                     "successfully.")

        @app.post("/v1/unload_lora_adapter", response_class=PlainTextResponse,
                  responses=lora_docs)
        async def unload_lora(req: UnloadLoraRequest) -> PlainTextResponse:
            try:
                await adapters.unload(req.lora_name)
            except AdapterError as e:
                raise ApiError(e.status, str(e), "lora_name") from None
            return PlainTextResponse(f"Success: LoRA adapter '{req.lora_name}' removed "
                                     "successfully.")

    @app.post("/v1/chat/completions", responses=generating)
    async def chat(req: ChatRequest, request: Request) -> Any:
        check_chat(req)
        name, engine = served(req.model)
        messages = chat_messages(req.messages)
        try:
            ids = engine.encode(messages)
        except Exception as e:  # noqa: BLE001 - a template's own error type; the client's fault
            raise ApiError(400, f"the chat template rejected the messages: {e}",
                           "messages") from None
        n_tokens = budget(len(ids), req.max_completion_tokens or req.max_tokens,
                          default_max_tokens)
        want_lp = bool(req.logprobs)
        top_n = req.top_logprobs or 0
        events = engine.stream(ids, sampling(req, n_tokens, want_lp),
                               prefix_len=engine.prefix_len(messages, ids), top_logprobs=top_n)
        as_ids = req.return_tokens_as_token_ids
        head = {"id": f"chatcmpl-{uuid.uuid4().hex}", "created": int(time.time()), "model": name}
        if req.stream:
            def choice(first: bool = False, text: str | None = None, logprobs: Any = None,
                       finish: str | None = None) -> dict[str, Any]:
                delta = ({"role": "assistant", "content": ""} if first
                         else {"content": text} if text is not None else {})
                return {"index": 0, "delta": delta, "logprobs": logprobs, "finish_reason": finish}

            lp_of = ((lambda steps, _: {"content": [chat_logprob(s, as_ids) for s in steps]})
                     if want_lp else None)
            include = bool(req.stream_options and req.stream_options.include_usage)
            return EventStream(stream_events(events, engine.sampling(
                sampling(req, n_tokens, want_lp)),
                {**head, "object": "chat.completion.chunk"}, choice, lp_of, include))
        try:
            steps, c = await unless_disconnected(request, collect(events))
        except LLMError as e:
            raise generation_failed(e) from None
        logprobs = ({"content": [chat_logprob(s, as_ids) for s in steps]} if want_lp else None)
        choice_out = {"index": 0, "message": {"role": "assistant", "content": c.text},
                      "finish_reason": c.finish_reason, "logprobs": logprobs}
        out = {**head, "object": "chat.completion", "choices": [choice_out], "usage": usage(c)}
        if req.return_token_ids:  # where vLLM puts them
            out["prompt_token_ids"] = list(ids)
            choice_out["token_ids"] = [s.token_id for s in steps]
        return out

    @app.post("/v1/completions", responses=generating)
    async def completions(req: CompletionRequest, request: Request) -> Any:
        check_completion(req)
        name, engine = served(req.model)
        prompts = [req.prompt] if isinstance(req.prompt, str) else req.prompt
        if not prompts or not all(isinstance(p, str) for p in prompts):
            raise ApiError(400, "prompt must be a string or a non-empty list of strings "
                           "(token-id prompts are not supported)", "prompt")
        if req.stream and len(prompts) > 1:
            raise ApiError(400, "streaming takes one prompt per request", "prompt")
        want_lp = req.logprobs is not None
        top_n = req.logprobs or 0
        as_ids = req.return_tokens_as_token_ids
        runs = []
        prompt_id_lists: list[list[int]] = []
        for p in prompts:
            ids = list(tokenizer(p)["input_ids"])
            if not ids:  # vLLM answers the same: nothing to condition on
                raise ApiError(400, "The prompt cannot be empty", "prompt")
            n_tokens = budget(len(ids), req.max_tokens, COMPLETIONS_DEFAULT_MAX_TOKENS)
            prompt_id_lists.append(ids)
            runs.append(engine.stream(ids, sampling(req, n_tokens, want_lp),
                                      top_logprobs=top_n))
        head = {"id": f"cmpl-{uuid.uuid4().hex}", "object": "text_completion",
                "created": int(time.time()), "model": name}
        if req.stream:
            def choice(first: bool = False, text: str | None = None, logprobs: Any = None,
                       finish: str | None = None) -> dict[str, Any]:
                return {"index": 0, "text": text or "", "logprobs": logprobs,
                        "finish_reason": finish}

            lp_of = ((lambda steps, offset: completion_logprobs(steps, as_ids, offset))
                     if want_lp else None)
            include = bool(req.stream_options and req.stream_options.include_usage)
            params = engine.sampling(sampling(req, n_tokens, want_lp))
            return EventStream(stream_events(runs[0], params, head, choice, lp_of, include))
        try:
            results = await unless_disconnected(
                request, asyncio.gather(*(collect(r) for r in runs)))
        except LLMError as e:
            raise generation_failed(e) from None
        choices = [{"index": i, "text": c.text, "finish_reason": c.finish_reason,
                    "logprobs": completion_logprobs(steps, as_ids, 0) if want_lp else None}
                   for i, (steps, c) in enumerate(results)]
        if req.return_token_ids:
            for ch, ids, (steps, _) in zip(choices, prompt_id_lists, results):
                ch["prompt_token_ids"] = list(ids)
                ch["token_ids"] = [s.token_id for s in steps]
        total = [sum(getattr(c, f) for _, c in results) for f in
                 ("prompt_tokens", "completion_tokens")]
        return {**head, "choices": choices,
                "usage": {"prompt_tokens": total[0], "completion_tokens": total[1],
                          "total_tokens": sum(total)}}

    return app
