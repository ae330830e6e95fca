"""The ``openai`` backend: any OpenAI-compatible ``/chat/completions`` server.

vLLM, SGLang, the llama.cpp server, Ollama, OpenAI itself and ``marag serve-llm`` all speak
this protocol. One HTTP request per conversation; at most ``max_concurrency`` in flight.
Rate limits (429), server errors (5xx), connection errors and timeouts are retried with
exponential backoff plus jitter, honouring ``Retry-After``; other 4xx answers fail at once
with the server's message. Every attempt is bounded by ``timeout`` seconds in total, so a
server that accepts the connection and never answers cannot hang a run.

``top_logprobs=n`` asks for the n likeliest tokens at every generated position (logprobs are
then requested whatever the sampling parameters say); they come back as
``Completion.top_logprobs``, each position's sampled token with its alternatives, which is how
Self-RAG reads the probabilities of its reflection tokens. ``extra_body`` is added to every
request over marag's own fields (vLLM's ``skip_special_tokens: false``, for one).

Token ids: with ``token_ids=True`` a logprobs request also asks for vLLM's
``return_tokens_as_token_ids`` (``marag serve-llm`` honours it too), whose logprob entries
name tokens as ``token_id:<id>``; the completion then carries the sampled token ids, which a
trainer needs to score exactly what was generated. It also asks for ``return_token_ids``
(vLLM >= 0.10.2, and ``marag serve-llm``): the server then sends the prompt's token ids, so a
trainer can check that its own rendering of the conversation is what the server decoded
from. Off by default: OpenAI's own API rejects the unknown fields.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import random
import time
from typing import Any

import httpx

from marag.llm.base import LLMError, Messages, SamplingParams
from marag.types import Completion

log = logging.getLogger(__name__)

RETRY_STATUS = frozenset({408, 409, 429}) | frozenset(range(500, 600))
MAX_RETRY_AFTER = 60.0


class _Retryable(Exception):
    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class OpenAIBackend:
    name = "openai"

    def __init__(self, base_url: str, model: str, *, api_key_env: str = "OPENAI_API_KEY",
                 max_concurrency: int = 16, timeout: float = 120.0, retries: int = 3,
                 backoff: float = 0.5, token_ids: bool = False, top_logprobs: int = 0,
                 extra_body: dict[str, Any] | None = None) -> None:
        if max_concurrency < 1:
            raise LLMError(f"max_concurrency must be >= 1, got {max_concurrency}")
        self.model = model
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.api_key_env = api_key_env
        self.max_concurrency = max_concurrency
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff
        self.token_ids = token_ids
        self.top_logprobs = top_logprobs
        self.extra_body = dict(extra_body or {})
        self._client: httpx.AsyncClient | None = None
        self._sem: asyncio.Semaphore | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._warned_allowed = False

    def _headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json"}
        key = os.environ.get(self.api_key_env, "")
        if key:  # local servers need no key
            headers["Authorization"] = f"Bearer {key}"
        return headers

    def _session(self) -> tuple[httpx.AsyncClient, asyncio.Semaphore]:
        loop = asyncio.get_running_loop()
        if self._client is None or self._loop is not loop:
            # httpx connections and asyncio semaphores belong to one event loop
            self._loop = loop
            limits = httpx.Limits(max_connections=self.max_concurrency,
                                  max_keepalive_connections=self.max_concurrency)
            self._client = httpx.AsyncClient(timeout=self.timeout, limits=limits)
            self._sem = asyncio.Semaphore(self.max_concurrency)
        assert self._sem is not None
        return self._client, self._sem

    def body(self, messages: Messages, params: SamplingParams) -> dict[str, Any]:
        """The JSON request for one conversation."""
        body: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "temperature": params.temperature,
            "top_p": params.top_p,
            "max_tokens": params.max_tokens,
        }
        if messages and messages[-1].get("role") == "assistant":
            # continue the open assistant turn (Search-R1's trajectory) instead of starting a
            # new one: vLLM's and SGLang's chat extension, also read by marag serve-llm
            body["continue_final_message"] = True
            body["add_generation_prompt"] = False
        if params.stop:
            body["stop"] = list(params.stop)
        if params.seed is not None:
            body["seed"] = params.seed
        if params.min_tokens:
            body["min_tokens"] = params.min_tokens  # vLLM's, SGLang's and serve-llm's extension
        if params.logprobs or self.top_logprobs:
            body["logprobs"] = True
            if self.top_logprobs:
                body["top_logprobs"] = self.top_logprobs
            if self.token_ids:
                body["return_tokens_as_token_ids"] = True
                body["return_token_ids"] = True
        body.update(self.extra_body)
        return body

    async def generate(self, batch: list[Messages], params: SamplingParams) -> list[Completion]:
        if params.allowed_text and not self._warned_allowed:
            log.warning("openai backend cannot restrict decoding to allowed_text; ignoring it")
            self._warned_allowed = True
        client, sem = self._session()
        return list(await asyncio.gather(*(self._one(client, sem, m, params) for m in batch)))

    async def _one(self, client: httpx.AsyncClient, sem: asyncio.Semaphore, messages: Messages,
                   params: SamplingParams) -> Completion:
        body = self.body(messages, params)
        t0 = time.perf_counter()
        last = ""
        for attempt in range(self.retries + 1):
            try:
                async with sem:
                    data = await self._post(client, body)
                return self._completion(data, time.perf_counter() - t0)
            except _Retryable as e:
                last = str(e)
                if attempt == self.retries:
                    break
                delay = self.backoff * (2 ** attempt) * (1.0 + random.random())
                if e.retry_after is not None:
                    delay = max(delay, min(e.retry_after, MAX_RETRY_AFTER))
                log.warning("%s: %s; retry %d/%d in %.2fs", self.url, last, attempt + 1,
                            self.retries, delay)
                await asyncio.sleep(delay)
        raise LLMError(f"{self.url}: no answer after {self.retries + 1} attempt(s); last error: "
                       f"{last}")

    async def _post(self, client: httpx.AsyncClient, body: dict[str, Any]) -> dict[str, Any]:
        try:
            async with asyncio.timeout(self.timeout):
                resp = await client.post(self.url, json=body, headers=self._headers())
        except (TimeoutError, httpx.TimeoutException):
            raise _Retryable(f"timed out after {self.timeout:g}s") from None
        except httpx.TransportError as e:
            raise _Retryable(f"connection error: {type(e).__name__}: {e}") from None
        if resp.status_code in RETRY_STATUS:
            raise _Retryable(f"HTTP {resp.status_code}: {_server_message(resp)}",
                             _retry_after(resp))
        if resp.status_code >= 400:
            raise LLMError(f"{self.url}: HTTP {resp.status_code}: {_server_message(resp)}")
        try:
            data = resp.json()
        except json.JSONDecodeError:
            raise LLMError(f"{self.url}: response is not JSON: {resp.text[:200]!r}") from None
        if not isinstance(data, dict):
            raise LLMError(f"{self.url}: response is not a JSON object: {resp.text[:200]!r}")
        return data

    def _completion(self, data: dict[str, Any], latency: float) -> Completion:
        try:
            choice = data["choices"][0]
            message = choice.get("message") or {}
            text = message.get("content") or ""
        except (KeyError, IndexError, TypeError, AttributeError):
            raise LLMError(f"{self.url}: response has no choices[0].message: "
                           f"{json.dumps(data)[:200]}") from None
        usage = data.get("usage") or {}
        logprobs = token_ids = top = None
        content = (choice.get("logprobs") or {}).get("content")
        if isinstance(content, list):
            entries = [t for t in content if isinstance(t, dict)
                       and isinstance(t.get("logprob"), (int, float))]
            logprobs = [float(t["logprob"]) for t in entries]
            if self.token_ids:
                token_ids = _token_ids([t.get("token") for t in entries])
            if self.top_logprobs:
                top = [_alternatives(t) for t in entries]
        prompt_ids = None
        if self.token_ids:
            # vLLM puts them on the response (chat) or on the choice (completions)
            prompt_ids = _int_list(data.get("prompt_token_ids", choice.get("prompt_token_ids")))
        return Completion(
            text=text,
            finish_reason=choice.get("finish_reason") or "stop",
            prompt_tokens=int(usage.get("prompt_tokens") or 0),
            completion_tokens=int(usage.get("completion_tokens") or 0),
            prompt_token_ids=prompt_ids,
            logprobs=logprobs,
            token_ids=token_ids,
            model=str(data.get("model") or self.model),
            latency=latency,
            top_logprobs=top,
        )

    async def aclose(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            try:
                await client.aclose()
            except RuntimeError:  # its event loop is already closed
                pass


def _token_ids(tokens: list[Any]) -> list[int] | None:
    """Ids from ``token_id:<id>`` logprob tokens; None unless every entry has that form."""
    ids = []
    for t in tokens:
        if not isinstance(t, str) or not t.startswith("token_id:"):
            return None
        try:
            ids.append(int(t[len("token_id:"):]))
        except ValueError:
            return None
    return ids


def _alternatives(entry: dict[str, Any]) -> dict[str, Any]:
    """One position's sampled token and its alternatives (token text -> logprob)."""
    top: dict[str, float] = {}
    for alt in entry.get("top_logprobs") or []:
        if isinstance(alt, dict) and isinstance(alt.get("logprob"), (int, float)):
            top[str(alt.get("token", ""))] = float(alt["logprob"])
    return {"token": str(entry.get("token", "")), "top": top}


def _int_list(value: Any) -> list[int] | None:
    if isinstance(value, list) and all(isinstance(v, int) for v in value):
        return list(value)
    return None


def _server_message(resp: httpx.Response) -> str:
    try:
        data = resp.json()
    except (json.JSONDecodeError, UnicodeDecodeError):
        return resp.text[:500] or resp.reason_phrase
    if isinstance(data, dict):
        err = data.get("error", data.get("detail"))
        if isinstance(err, dict) and "message" in err:
            return str(err["message"])[:500]
        if err is not None:
            return json.dumps(err)[:500] if not isinstance(err, str) else err[:500]
    return resp.text[:500]


def _retry_after(resp: httpx.Response) -> float | None:
    value = resp.headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None  # an HTTP date; the exponential backoff applies instead
