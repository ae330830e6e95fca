"""Fixtures for workflow tests: a real BM25 index over the HotpotQA fixture passages
and a helper that builds a Context around scripted backends."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI, Request

from marag.config import load_config
from marag.retrieval.base import Retriever
from marag.workflows import Context


@pytest.fixture(scope="session")
def hotpot_retriever(qa_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Retriever:
    from marag.retrieval import build_index, open_index

    out = tmp_path_factory.mktemp("hotpot_bm25")
    build_index(qa_data / "hotpotqa.corpus.jsonl", out / "idx", kind="bm25")
    return open_index(out / "idx")


def make_ctx(llms: Any, retriever: Retriever | None, *overrides: str) -> Context:
    """``llms``: one backend (used for every role) or a dict by config name; ``overrides`` are
    config overrides such as ``"method.max_rounds=3"``."""
    if not isinstance(llms, dict):
        llms = {"default": llms}
    items = [f"llms.{name}.backend=scripted" for name in llms]
    return Context(llms=llms, config=load_config(None, [*items, *overrides]), retriever=retriever)


@pytest.fixture
def ctx_for():  # type: ignore[no-untyped-def]
    return make_ctx


def scripted_chat_app(reply: Any) -> tuple[Any, list[dict[str, Any]]]:
    """``(app, seen)``: an OpenAI-compatible chat route whose reply text is ``reply(body)``
    (cut at the request's stop strings by :func:`chat_completion`), or ``(text, logprobs)``
    with the choice's ``logprobs.content`` entries; ``seen`` collects the request bodies in
    order."""
    seen: list[dict[str, Any]] = []
    app = FastAPI()

    @app.post("/v1/chat/completions")
    async def chat(request: Request) -> dict[str, Any]:
        body = await request.json()
        seen.append(body)
        out = reply(body)
        text, logprobs = out if isinstance(out, tuple) else (out, None)
        return chat_completion(body, text, logprobs)

    return app, seen


def chat_completion(body: dict[str, Any], text: str,
                    logprobs: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """A scripted OpenAI-compatible server's reply: ``text`` cut at the request's first stop
    string (dropped, as the API does), finish reason ``stop``; ``logprobs``: the choice's
    ``logprobs.content`` (OpenAI's per-token entries), when given."""
    for stop in body.get("stop") or []:
        if stop in text:
            text = text[:text.index(stop)]
    choice: dict[str, Any] = {"index": 0, "finish_reason": "stop",
                              "message": {"role": "assistant", "content": text}}
    if logprobs is not None:
        choice["logprobs"] = {"content": logprobs}
    return {"id": "x", "object": "chat.completion", "model": body["model"], "choices": [choice],
            "usage": {"prompt_tokens": 50, "completion_tokens": 12}}


async def run_behind_openai(serve_app: Any, app: Any, method: str, question: Any,
                            retriever: Retriever, model: str) -> Any:
    """Run ``method`` on ``question`` with the default LLM behind the openai backend, served
    by ``app`` on a local port."""
    from marag.llm.openai_http import OpenAIBackend
    from marag.workflows import run_method

    with serve_app(app) as url:
        backend = OpenAIBackend(url + "/v1", model)
        config = load_config(None, [f"method.name={method}", "llms.default.backend=openai",
                                    f"llms.default.base_url={url}/v1"])
        ctx = Context(llms={"default": backend}, config=config, retriever=retriever)
        try:
            return await run_method(method, question, ctx)
        finally:
            await backend.aclose()
