"""A ``Retriever`` that asks a retrieval server over HTTP (marag's own or any Search-R1 one).

It speaks ``POST /retrieve`` with ``return_scores: true`` and turns each returned document back
into a ``Passage``. Connection errors, timeouts and 5xx answers are retried with exponential
backoff; a 4xx is the caller's mistake and fails at once. When the retries run out the error
names the URL, so a dead endpoint is a clear ``RetrievalError``, never a hang.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import httpx

from marag.retrieval.base import RetrievalError, Retriever
from marag.retrieval.coalesce import Coalescer
from marag.types import Hits, Passage

log = logging.getLogger(__name__)


def split_contents(contents: str) -> tuple[str, str]:
    """``'"Title"\\ntext'`` -> ``("Title", "text")``; a first line without quotes is still
    the title (some corpora store it bare), and text without any newline has no title."""
    head, sep, text = contents.partition("\n")
    if not sep:
        if len(head) >= 2 and head[0] == head[-1] == '"':
            return head[1:-1], ""
        return "", contents
    if len(head) >= 2 and head[0] == head[-1] == '"':
        head = head[1:-1]
    return head, text


def parse_document(doc: Any, where: str) -> Passage:
    if not isinstance(doc, dict):
        raise RetrievalError(f"{where}: document must be an object, got {type(doc).__name__}")
    doc_id = doc.get("id")
    if doc_id is None or isinstance(doc_id, (dict, list, bool)):
        raise RetrievalError(f"{where}: document has no usable 'id': {str(doc)[:200]}")
    if "contents" in doc and isinstance(doc["contents"], str):
        title, text = split_contents(doc["contents"])
    elif isinstance(doc.get("text"), str):
        title, text = str(doc.get("title", "")), doc["text"]
    else:
        raise RetrievalError(f"{where}: document {doc_id!r} has neither 'contents' nor 'text'")
    # servers that also send explicit title/text fields know better than our split
    if isinstance(doc.get("title"), str) and isinstance(doc.get("text"), str):
        title, text = doc["title"], doc["text"]
    return Passage(id=str(doc_id), title=title, text=text)


def parse_response(payload: Any, queries: list[str], url: str) -> list[Hits]:
    result = payload.get("result") if isinstance(payload, dict) else None
    if not isinstance(result, list):
        raise RetrievalError(f"{url}: response has no 'result' list: {str(payload)[:200]}")
    if len(result) != len(queries):
        raise RetrievalError(f"{url}: sent {len(queries)} queries, got {len(result)} result lists")
    out = []
    for qi, (query, items) in enumerate(zip(queries, result)):
        if not isinstance(items, list):
            raise RetrievalError(f"{url}: result[{qi}] must be a list")
        hits = Hits(query=query)
        for di, item in enumerate(items):
            where = f"{url}: result[{qi}][{di}]"
            if not isinstance(item, dict) or "document" not in item or "score" not in item:
                raise RetrievalError(f"{where}: expected {{'document', 'score'}} (was "
                                     "return_scores ignored by the server?)")
            score = item["score"]
            if isinstance(score, bool) or not isinstance(score, (int, float, str)):
                raise RetrievalError(f"{where}: score must be a number, got {score!r}")
            try:
                value = float(score)
            except ValueError:
                raise RetrievalError(f"{where}: score must be a number, got {score!r}") from None
            hits.passages.append(parse_document(item["document"], where))
            hits.scores.append(value)
        out.append(hits)
    return out


def _reason(response: httpx.Response) -> str:
    try:
        detail = response.json().get("detail")
    except (ValueError, AttributeError):
        detail = None
    if isinstance(detail, list):  # FastAPI's validation errors: [{"loc", "msg", ...}, ...]
        parts = []
        for e in detail:
            if not isinstance(e, dict):
                parts.append(str(e))
                continue
            loc = ".".join(str(x) for x in e.get("loc", ()) if x != "body")
            parts.append(f"{loc}: {e.get('msg')}" if loc else str(e.get("msg")))
        return "; ".join(parts)
    return str(detail if detail is not None else response.text[:300])


class RetrieverClient(Retriever):
    """``Retriever`` over HTTP. ``url`` is the server root (``http://127.0.0.1:8000``) or its
    ``/retrieve`` endpoint. ``retries`` counts extra attempts after the first.

    Async searches issued concurrently (many workflows each retrieving for one sub-question)
    are merged into shared requests, at most ``max_inflight`` at a time: an HTTP round trip
    costs far more than the extra queries in it, and fewer, larger requests also spare the
    server. ``coalesce=False`` sends every call as it comes."""

    name = "http"

    def __init__(self, url: str, *, timeout: float = 30.0, retries: int = 3, batch_size: int = 256,
                 backoff: float = 0.5, max_backoff: float = 8.0, coalesce: bool = True,
                 max_inflight: int = 4) -> None:
        if retries < 0 or batch_size < 1 or timeout <= 0 or max_inflight < 1:
            raise ValueError("RetrieverClient needs retries >= 0, batch_size >= 1, timeout > 0 "
                             "and max_inflight >= 1")
        base = url.rstrip("/")
        base = base.removesuffix("/retrieve")
        self.url = base
        self.endpoint = base + "/retrieve"
        self.timeout = timeout
        self.retries = retries
        self.batch_size = batch_size
        self.backoff = backoff
        self.max_backoff = max_backoff
        self._client: httpx.Client | None = None
        self._aclient: httpx.AsyncClient | None = None
        self._aloop: asyncio.AbstractEventLoop | None = None
        self._coalescer = (Coalescer(self._search_now, concurrency=max_inflight, max_batch=batch_size)
                           if coalesce else None)

    def __repr__(self) -> str:
        return f"RetrieverClient({self.url!r})"

    # ------------------------------------------------------------------ shared pieces

    def _delay(self, attempt: int) -> float:
        return min(self.backoff * (2**attempt), self.max_backoff)

    def _batches(self, queries: list[str]) -> list[list[str]]:
        return [queries[i : i + self.batch_size] for i in range(0, len(queries), self.batch_size)]

    def _check(self, response: httpx.Response, batch: list[str]) -> list[Hits] | None:
        """Parsed hits, ``None`` for a retryable server error; raises on a client error."""
        if response.status_code >= 500:
            return None
        if response.status_code >= 400:
            raise RetrievalError(
                f"{self.endpoint} rejected the request ({response.status_code}): {_reason(response)}"
            )
        try:
            payload = response.json()
        except ValueError:
            raise RetrievalError(f"{self.endpoint}: response is not JSON: {response.text[:200]}") from None
        return parse_response(payload, batch, self.endpoint)

    def _give_up(self, last: str) -> RetrievalError:
        return RetrievalError(
            f"retrieval server {self.endpoint} failed after {self.retries + 1} attempt(s): {last}"
        )

    @staticmethod
    def _body(batch: list[str], k: int) -> dict[str, Any]:
        return {"queries": batch, "topk": k, "return_scores": True}

    # ------------------------------------------------------------------ sync

    def _post(self, batch: list[str], k: int) -> list[Hits]:
        if self._client is None:
            self._client = httpx.Client(timeout=self.timeout)
        last = ""
        for attempt in range(self.retries + 1):
            if attempt:
                time.sleep(self._delay(attempt - 1))
            try:
                response = self._client.post(self.endpoint, json=self._body(batch, k))
            except httpx.TransportError as e:
                last = f"{type(e).__name__}: {e}"
            else:
                hits = self._check(response, batch)
                if hits is not None:
                    return hits
                last = f"HTTP {response.status_code}: {_reason(response)}"
            log.warning("retrieval attempt %d/%d at %s failed: %s",
                        attempt + 1, self.retries + 1, self.endpoint, last)
        raise self._give_up(last)

    def search_batch(self, queries: list[str], k: int) -> list[Hits]:
        out: list[Hits] = []
        for batch in self._batches(queries):
            out.extend(self._post(batch, k))
        return out

    # ------------------------------------------------------------------ async

    def _async_client(self) -> httpx.AsyncClient:
        loop = asyncio.get_running_loop()
        # an AsyncClient's connections belong to the loop that opened them
        if self._aclient is None or self._aloop is not loop:
            self._aclient = httpx.AsyncClient(timeout=self.timeout)
            self._aloop = loop
        return self._aclient

    async def _apost(self, batch: list[str], k: int) -> list[Hits]:
        client = self._async_client()
        last = ""
        for attempt in range(self.retries + 1):
            if attempt:
                await asyncio.sleep(self._delay(attempt - 1))
            try:
                response = await client.post(self.endpoint, json=self._body(batch, k))
            except httpx.TransportError as e:
                last = f"{type(e).__name__}: {e}"
            else:
                hits = self._check(response, batch)
                if hits is not None:
                    return hits
                last = f"HTTP {response.status_code}: {_reason(response)}"
            log.warning("retrieval attempt %d/%d at %s failed: %s",
                        attempt + 1, self.retries + 1, self.endpoint, last)
        raise self._give_up(last)

    async def _search_now(self, queries: list[str], k: int) -> list[Hits]:
        parts = await asyncio.gather(*(self._apost(b, k) for b in self._batches(queries)))
        return [hits for part in parts for hits in part]

    async def search(self, queries: list[str], k: int) -> list[Hits]:
        if self._coalescer is None or len(queries) >= self.batch_size:
            return await self._search_now(queries, k)
        return await self._coalescer.submit(queries, k)

    # ------------------------------------------------------------------ lifecycle

    async def aclose(self) -> None:
        if self._aclient is not None:
            # a client opened on another (by now usually closed) loop cannot be closed from
            # this one; its sockets went with that loop, so dropping it is all there is to do
            if self._aloop is asyncio.get_running_loop():
                await self._aclient.aclose()
            self._aclient = self._aloop = None
        self.close()

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    def health(self) -> dict[str, Any]:
        """The server's ``/health`` answer (one attempt; for start-up checks)."""
        try:
            response = httpx.get(self.url + "/health", timeout=self.timeout)
            response.raise_for_status()
            return response.json()
        except (httpx.HTTPError, ValueError) as e:
            raise RetrievalError(f"retrieval server {self.url} is not healthy: {e}") from None
