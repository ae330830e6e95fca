"""Mixed valid and invalid requests, concurrently, against all three servers (issue #23).

Each server runs in its own process on 127.0.0.1, as ``server_load.py`` / ``serve_load.py``
start them:

- ``marag serve-llm`` over the tiny random model (``marag.llm.tiny``): greedy chat and text
  completions, plain and streamed;
- ``marag serve-retriever`` over BM25 of the in-repo nq_open fixture corpus: ``/retrieve``
  (Search-R1's body) and ``/search`` (MAO-ARAG's);
- ``marag serve`` with the scripted decomposing team (``serve_load.py``): ``/api/ask``.

Every valid request is first sent alone and its answer recorded. Then, ``--rounds`` times,
all valid requests and all invalid ones (empty prompts, blank questions, wrong types, out-of
range numbers, bodies that are not JSON, unknown models and methods, undeclared methods,
oversized batches...) go out at once in a shuffled order (``--seed``). Passes when every
valid request answered 200 with exactly its alone answer, every invalid one a 4xx, and no
response at all was a 5xx; prints per-server counts and the 4xx codes seen.

Run: PYTHONPATH=src .venv/bin/python benchmarks/mixed_load.py [--rounds 5] [--seed 20261124]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import os
import random
import signal
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from server_load import free_port, start

FIXTURES = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "qa"


@dataclass(frozen=True)
class Call:
    """One request; ``key`` turns a 200 response into what must equal the alone answer."""

    name: str
    method: str
    path: str
    json: Any = None
    content: bytes | None = None
    valid: bool = True
    key: Callable[[httpx.Response], Any] | None = None


@dataclass
class Tally:
    valid_ok: int = 0
    valid_failed: list[str] = field(default_factory=list)
    invalid_4xx: Counter[int] = field(default_factory=Counter)
    invalid_other: list[str] = field(default_factory=list)
    server_errors: list[str] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)


def sse_text(r: httpx.Response) -> str:
    """The text of a streamed OpenAI chat or completion (deltas joined), ``[DONE]`` checked."""
    out, done = [], False
    for line in r.text.splitlines():
        if not line.startswith("data: "):
            continue
        data = line[6:]
        if data == "[DONE]":
            done = True
            continue
        body = json.loads(data)
        if "error" in body:
            raise AssertionError(f"stream error event: {body['error']}")
        for ch in body.get("choices", []):
            out.append(ch.get("delta", {}).get("content") or ch.get("text") or "")
    if not done:
        raise AssertionError("stream did not end with [DONE]")
    return "".join(out)


async def send(http: httpx.AsyncClient, c: Call) -> httpx.Response:
    if c.content is not None:
        return await http.request(c.method, c.path, content=c.content,
                                  headers={"content-type": "application/json"})
    return await http.request(c.method, c.path, json=c.json)


async def hammer(url: str, calls: list[Call], rounds: int, seed: int) -> Tally:
    tally = Tally()
    limits = httpx.Limits(max_connections=64)
    async with httpx.AsyncClient(base_url=url, timeout=300, limits=limits) as http:
        alone: dict[str, Any] = {}
        for c in calls:
            if c.valid:
                r = await send(http, c)
                if r.status_code != 200:
                    raise SystemExit(f"{url}: valid request {c.name} alone answered "
                                     f"{r.status_code}: {r.text[:300]}")
                alone[c.name] = c.key(r) if c.key else r.json()
        rng = random.Random(seed)

        async def one(c: Call) -> None:
            t = time.perf_counter()
            try:
                r = await send(http, c)
            except httpx.HTTPError as e:
                (tally.valid_failed if c.valid else tally.invalid_other).append(
                    f"{c.name}: {type(e).__name__}: {e}")
                return
            tally.seconds.append(time.perf_counter() - t)
            if r.status_code >= 500:
                tally.server_errors.append(f"{c.name}: {r.status_code} {r.text[:200]}")
            if c.valid:
                try:
                    got = c.key(r) if c.key and r.status_code == 200 else r.json()
                except Exception as e:  # noqa: BLE001 - reported as this request's failure
                    got = f"{type(e).__name__}: {e}"
                if r.status_code == 200 and got == alone[c.name]:
                    tally.valid_ok += 1
                else:
                    tally.valid_failed.append(f"{c.name}: {r.status_code} {str(got)[:200]}")
            elif 400 <= r.status_code < 500:
                tally.invalid_4xx[r.status_code] += 1
            else:
                tally.invalid_other.append(f"{c.name}: {r.status_code} {r.text[:200]}")

        for _ in range(rounds):
            batch = list(calls)
            rng.shuffle(batch)
            await asyncio.gather(*(one(c) for c in batch))
    return tally


# ----------------------------------------------------------------------------- the servers

CHAT_QS = ["hi there", "what is 2+2?", "name a river", "who wrote Hamlet?",
           "where is Paris?", "a question number 6?"]


def llm_calls() -> list[Call]:
    def chat(q: str, **kw: Any) -> dict[str, Any]:
        return {"model": "tiny", "messages": [{"role": "user", "content": q}],
                "max_tokens": 16, "temperature": 0, **kw}

    def content(r: httpx.Response) -> Any:
        return r.json()["choices"][0]["message"]["content"]

    def texts(r: httpx.Response) -> Any:
        return [ch["text"] for ch in r.json()["choices"]]

    def streamed(r: httpx.Response) -> Any:
        return sse_text(r)

    calls = [Call(f"chat{i}", "POST", "/v1/chat/completions", chat(q), key=content)
             for i, q in enumerate(CHAT_QS)]
    calls += [
        Call("chat-streamed", "POST", "/v1/chat/completions", chat("stream me", stream=True),
             key=streamed),
        Call("completion", "POST", "/v1/completions",
             {"model": "tiny", "prompt": "The capital of France is", "max_tokens": 12,
              "temperature": 0}, key=texts),
        Call("completion-2-prompts", "POST", "/v1/completions",
             {"model": "tiny", "prompt": ["one", "two three"], "max_tokens": 8,
              "temperature": 0}, key=texts),
        Call("models", "GET", "/v1/models"),
    ]
    bad: list[tuple[str, str, str, Any]] = [
        ("empty-prompt", "POST", "/v1/completions",
         {"model": "tiny", "prompt": "", "max_tokens": 4}),
        ("empty-prompt-streamed", "POST", "/v1/completions",
         {"model": "tiny", "prompt": "", "max_tokens": 4, "stream": True}),
        ("empty-prompt-in-list", "POST", "/v1/completions",
         {"model": "tiny", "prompt": ["fine", ""], "max_tokens": 4}),
        ("empty-prompt-list", "POST", "/v1/completions", {"model": "tiny", "prompt": []}),
        ("token-id-prompt", "POST", "/v1/completions", {"model": "tiny", "prompt": [[1, 2]]}),
        ("no-messages", "POST", "/v1/chat/completions", {"model": "tiny", "messages": []}),
        ("tool-role", "POST", "/v1/chat/completions",
         {"model": "tiny", "messages": [{"role": "tool", "content": "x"}]}),
        ("image-part", "POST", "/v1/chat/completions",
         {"model": "tiny", "messages": [{"role": "user", "content": [
             {"type": "image_url", "image_url": {"url": "http://x/y.png"}}]}]}),
        ("max-tokens-0", "POST", "/v1/chat/completions", chat("x", max_tokens=0)),
        ("max-tokens-huge", "POST", "/v1/chat/completions", chat("x", max_tokens=10**9)),
        ("temperature-negative", "POST", "/v1/chat/completions", chat("x", temperature=-1)),
        ("top-p-0", "POST", "/v1/chat/completions", chat("x", top_p=0)),
        ("n-3", "POST", "/v1/chat/completions", chat("x", n=3)),
        ("unknown-model", "POST", "/v1/chat/completions", chat("x", model="nope")),
        ("messages-wrong-type", "POST", "/v1/chat/completions",
         {"model": "tiny", "messages": "hello"}),
        ("body-array", "POST", "/v1/chat/completions", []),
        ("get-on-post-route", "GET", "/v1/chat/completions", None),
        ("unknown-path", "POST", "/v1/embeddings", {"input": "x"}),
    ]
    calls += [Call(n, m, p, j, valid=False) for n, m, p, j in bad]
    calls.append(Call("not-json", "POST", "/v1/chat/completions", content=b"{oops",
                      valid=False))
    return calls


def retriever_calls(questions: list[str]) -> list[Call]:
    calls = [Call(f"retrieve{i}", "POST", "/retrieve",
                  {"queries": questions[i * 3:(i + 1) * 3], "topk": 3, "return_scores": True})
             for i in range(4)]
    calls += [
        Call("retrieve-bare", "POST", "/retrieve", {"queries": questions[:2], "topk": 2}),
        Call("retrieve-empty-list", "POST", "/retrieve", {"queries": [], "topk": 3}),
        Call("search", "POST", "/search", {"questions": questions[:3], "N": 3}),
        Call("health", "GET", "/health"),
    ]
    bad: list[tuple[str, str, str, Any]] = [
        ("queries-not-list", "POST", "/retrieve", {"queries": "who", "topk": 3}),
        ("queries-numbers", "POST", "/retrieve", {"queries": [1, 2], "topk": 3}),
        ("topk-negative", "POST", "/retrieve", {"queries": ["who"], "topk": -1}),
        ("topk-word", "POST", "/retrieve", {"queries": ["who"], "topk": "three"}),
        ("topk-huge", "POST", "/retrieve", {"queries": ["who"] * 10, "topk": 10**7}),
        ("too-many-queries", "POST", "/retrieve", {"queries": ["who"] * 9000, "topk": 1}),
        ("missing-queries", "POST", "/retrieve", {"topk": 3}),
        ("search-N-negative", "POST", "/search", {"questions": ["who"], "N": -5}),
        ("search-questions-null", "POST", "/search", {"questions": None}),
        ("body-array", "POST", "/search", []),
        ("get-on-post-route", "GET", "/retrieve", None),
    ]
    calls += [Call(n, m, p, j, valid=False) for n, m, p, j in bad]
    calls.append(Call("not-json", "POST", "/retrieve", content=b"{oops", valid=False))
    return calls


def web_calls() -> list[Call]:
    from serve_load import QUESTION

    def answer(r: httpx.Response) -> Any:
        return r.json()["answer"]

    calls = [Call(f"ask{i}", "POST", "/api/ask", {"question": QUESTION, "id": f"m{i}"},
                  key=answer) for i in range(6)]
    calls.append(Call("health", "GET", "/health", key=lambda r: r.json()["status"]))
    bad: list[tuple[str, str, str, Any]] = [
        ("blank-question", "POST", "/api/ask", {"question": "   "}),
        ("empty-question", "POST", "/api/ask", {"question": ""}),
        ("missing-question", "POST", "/api/ask", {}),
        ("question-number", "POST", "/api/ask", {"question": 42}),
        ("unknown-field", "POST", "/api/ask", {"question": QUESTION, "nope": 1}),
        ("unknown-method", "POST", "/api/ask", {"question": QUESTION, "method": "nope"}),
        ("bad-override", "POST", "/api/ask", {"question": QUESTION, "overrides": ["x"]}),
        ("question-too-long", "POST", "/api/ask", {"question": "why " * 50_000}),
        ("blank-question-streamed", "POST", "/api/ask/stream", {"question": "\t\n"}),
        ("body-array", "POST", "/api/ask", []),
        ("get-on-post-route", "GET", "/api/ask", None),
        ("unknown-run", "GET", "/api/runs/nope", None),
    ]
    calls += [Call(n, m, p, j, valid=False) for n, m, p, j in bad]
    calls.append(Call("not-json", "POST", "/api/ask", content=b"{oops", valid=False))
    return calls


async def wait_healthy(url: str) -> None:
    async with httpx.AsyncClient(base_url=url, timeout=2) as http:
        for _ in range(600):
            try:
                if (await http.get("/health")).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            await asyncio.sleep(0.1)
    raise SystemExit(f"{url} did not become healthy")


def show(name: str, calls: list[Call], t: Tally, wall: float, rounds: int) -> bool:
    n_valid = sum(c.valid for c in calls) * rounds
    n_bad = sum(not c.valid for c in calls) * rounds
    codes = ", ".join(f"{k}: {v}" for k, v in sorted(t.invalid_4xx.items()))
    print(f"{name}: {rounds} rounds x {len(calls)} requests in {wall:.1f} s | valid "
          f"{t.valid_ok}/{n_valid} answered as alone | invalid {sum(t.invalid_4xx.values())}/"
          f"{n_bad} 4xx ({codes}) | 5xx: {len(t.server_errors)}")
    for line in (t.valid_failed + t.invalid_other + t.server_errors)[:20]:
        print("   ", line)
    return not (t.valid_failed or t.invalid_other or t.server_errors)


def run_one(name: str, url: str, calls: list[Call], args: argparse.Namespace) -> bool:
    t0 = time.perf_counter()
    tally = asyncio.run(hammer(url, calls, args.rounds, args.seed))
    return show(name, calls, tally, time.perf_counter() - t0, args.rounds)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seed", type=int, default=20261124)
    ap.add_argument("--only", choices=("llm", "retriever", "web"), action="append")
    args = ap.parse_args()
    which = args.only or ["llm", "retriever", "web"]
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        if "llm" in which:
            from marag.llm.tiny import build_tiny_model

            model, tok = build_tiny_model(seed=0)
            folder = Path(tmp) / "tiny"
            model.save_pretrained(folder)
            tok.save_pretrained(folder)
            port = free_port()
            proc = start(["serve-llm", "--model", str(folder), "--served-model-name", "tiny",
                          "--threads", "1", "--max-batch-size", "16"], port)
            try:
                ok &= run_one("serve-llm", f"http://127.0.0.1:{port}", llm_calls(), args)
            finally:
                proc.terminate()
                proc.wait(20)
        if "retriever" in which:
            from marag.retrieval import build_index
            from marag.types import iter_jsonl

            questions = [q["question"] for _, q in
                         iter_jsonl(FIXTURES / "nq_open.questions.jsonl")]
            index = build_index(FIXTURES / "nq_open.corpus.jsonl", Path(tmp) / "bm25",
                                kind="bm25", show_progress=False)
            port = free_port()
            proc = start(["serve-retriever", str(index)], port)
            try:
                ok &= run_one("serve-retriever", f"http://127.0.0.1:{port}",
                              retriever_calls(questions), args)
            finally:
                proc.terminate()
                proc.wait(20)
    if "web" in which:
        from serve_load import serve

        port = free_port()
        proc = mp.get_context("spawn").Process(target=serve, args=(port, 0.01, 64))
        proc.start()
        try:
            asyncio.run(wait_healthy(f"http://127.0.0.1:{port}"))
            ok &= run_one("serve", f"http://127.0.0.1:{port}", web_calls(), args)
        finally:
            assert proc.pid is not None
            os.kill(proc.pid, signal.SIGINT)
            proc.join(10)
    if not ok:
        raise SystemExit("FAILED")
    print("PASSED: every valid request answered as alone, every invalid one a 4xx, no 5xx")


if __name__ == "__main__":
    main()
