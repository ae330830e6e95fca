"""OpenAPI response documentation shared by marag's HTTP servers (``serve``, ``serve-llm``,
``serve-retriever``): every status a route can answer, with the body it carries, so that a
client generated from ``/openapi.json`` (or a fuzzer checking it) sees what the server does."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

# what each status means to a client, for the response descriptions
REASONS = {
    400: "The request is malformed or asks for something this server does not do",
    401: "Missing or wrong bearer token",
    404: "No such resource",
    405: "Method not allowed on this path",
    413: "The request is over one of the server's limits (body bytes, batch size)",
    422: "The request is well-formed but refused (a field's value)",
    429: "Too many requests in flight; retry later",
    499: "The client went away before the answer",
    500: "The server failed on a valid request (an index or a model that cannot be read)",
    504: "The request took longer than the server's time limit",
}

# one server-sent event as a fuzzer or a generated client reads it off the stream
SSE_EVENT = {"type": "object", "properties": {"event": {"type": "string"},
                                              "data": {"type": "string"}}}

Responses = dict[int | str, dict[str, Any]]


def errors(model: type[BaseModel], *codes: int) -> Responses:
    """``responses=`` entries: each of ``codes`` answered with a ``model`` JSON body."""
    return {code: {"model": model, "description": REASONS.get(code, "Error")} for code in codes}


def event_stream(description: str) -> Responses:
    """A 200 that is a server-sent event stream (``text/event-stream``), not JSON."""
    return {200: {"description": description,
                  "content": {"text/event-stream": {"schema": SSE_EVENT}}}}
