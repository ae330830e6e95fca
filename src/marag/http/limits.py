"""Request body size limit as plain ASGI middleware (before any route parses the body)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

Scope = dict[str, Any]
Message = dict[str, Any]


class BodyLimit:
    """Refuse with 413 any request whose body is larger than ``max_bytes``.

    A declared Content-Length is checked before reading; a chunked body is read up to the limit
    and then handed on whole, so a route never sees a partial body.
    """

    def __init__(self, app: Any, max_bytes: int,
                 body: Callable[[int, str], dict[str, Any]] | None = None) -> None:
        self.app = app
        self.max_bytes = max_bytes
        # the error body for (status, message); FastAPI's ``{"detail": message}`` by default
        self.body = body or (lambda _status, message: {"detail": message})

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None:
            try:
                size = int(declared)
            except ValueError:
                await self._reply(send, 400, "invalid Content-Length")
                return
            if size > self.max_bytes:
                await self._reply(send, 413, f"body of {size} bytes; the limit is {self.max_bytes}")
                return
            await self.app(scope, receive, send)
            return
        if scope.get("method") not in ("POST", "PUT", "PATCH"):
            await self.app(scope, receive, send)
            return
        chunks, size = [], 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return  # the client went away while sending
            chunks.append(message.get("body", b""))
            size += len(chunks[-1])
            if size > self.max_bytes:
                await self._reply(send, 413, f"body over the limit of {self.max_bytes} bytes")
                return
            if not message.get("more_body"):
                break
        body = b"".join(chunks)
        sent = False

        async def replay() -> Message:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    async def _reply(self, send: Any, status: int, message: str) -> None:
        await _reply(send, status, self.body(status, message))


async def _reply(send: Any, status: int, content: dict[str, Any]) -> None:
    body = json.dumps(content).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})
