"""A bounded loopback load test of both servers, each in its own process on 127.0.0.1.

1. ``marag serve-retriever`` over BM25 of the shared HotpotQA corpus: 200 raw ``POST
   /retrieve`` requests (one question each, top-3 with scores, Search-R1's body) at 16 in
   flight, then one Search-R1 GRPO-sized request of 2,560 queries.
2. ``marag serve-llm`` over the tiny random model (``marag.llm.tiny``, saved to a folder):
   32 concurrent streamed chat completions through the ``openai`` SDK, 64 tokens each;
   time to first text and to the end of each stream.

Every response is checked (status, shape, ``[DONE]``-terminated streams with the promised
token count); the run fails on any error. Bounded: about a minute on a busy 2-core box.

Run: PYTHONPATH=src .venv/bin/python benchmarks/server_load.py [--data DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from marag.retrieval import build_index
from marag.types import iter_jsonl

RETRIEVE_REQUESTS = 200
RETRIEVE_INFLIGHT = 16
CHATS = 32
CHAT_TOKENS = 64


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(args: list[str], port: int) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-m", "marag.cli", *args, "--port", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{args[0]} exited with {proc.returncode}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                return proc
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    proc.terminate()
    raise RuntimeError(f"{args[0]} did not become healthy")


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def report(name: str, seconds: list[float], wall: float) -> None:
    print(f"{name}: n={len(seconds)} wall {wall:.2f} s  p50 {1000 * pct(seconds, 0.5):.0f} ms  "
          f"p99 {1000 * pct(seconds, 0.99):.0f} ms  max {1000 * max(seconds):.0f} ms")


async def load_retriever(url: str, questions: list[str]) -> None:
    gate = asyncio.Semaphore(RETRIEVE_INFLIGHT)
    latencies: list[float] = []
    limits = httpx.Limits(max_connections=RETRIEVE_INFLIGHT)
    async with httpx.AsyncClient(base_url=url, timeout=60, limits=limits) as http:

        async def one(q: str) -> None:
            async with gate:
                t = time.perf_counter()
                r = await http.post("/retrieve", json={"queries": [q], "topk": 3,
                                                       "return_scores": True})
                latencies.append(time.perf_counter() - t)
            r.raise_for_status()
            [items] = r.json()["result"]
            assert len(items) <= 3 and all(i["document"]["contents"] for i in items)

        t0 = time.perf_counter()
        await asyncio.gather(*(one(q) for q in questions[:RETRIEVE_REQUESTS]))
        report(f"/retrieve, 1 query per request, {RETRIEVE_INFLIGHT} in flight", latencies,
               time.perf_counter() - t0)

        batch = (questions * (2560 // len(questions) + 1))[:2560]
        t = time.perf_counter()
        r = await http.post("/retrieve", json={"queries": batch, "topk": 3,
                                               "return_scores": True})
        r.raise_for_status()
        assert len(r.json()["result"]) == 2560
        print(f"/retrieve, one request of 2,560 queries (Search-R1 GRPO batch): "
              f"{time.perf_counter() - t:.2f} s, {len(r.content) / 1e6:.1f} MB")


async def load_llm(url: str) -> None:
    import openai

    client = openai.AsyncOpenAI(base_url=url + "/v1", api_key="unused", max_retries=0,
                                timeout=300)
    first: list[float] = []
    total: list[float] = []

    async def one(i: int) -> None:
        t = time.perf_counter()
        stream = await client.chat.completions.create(
            model="tiny", messages=[{"role": "user", "content": f"question number {i}?"}],
            max_tokens=CHAT_TOKENS, temperature=0.7, seed=i, stream=True,
            stream_options={"include_usage": True})
        seen_text = False
        usage = None
        async for chunk in stream:
            if not seen_text and chunk.choices and chunk.choices[0].delta.content:
                first.append(time.perf_counter() - t)
                seen_text = True
            usage = chunk.usage or usage
        total.append(time.perf_counter() - t)
        assert usage is not None and 0 < usage.completion_tokens <= CHAT_TOKENS

    t0 = time.perf_counter()
    await asyncio.gather(*(one(i) for i in range(CHATS)))
    wall = time.perf_counter() - t0
    await client.close()
    report(f"streamed chat, {CHATS} concurrent, first text", first, wall)
    report(f"streamed chat, {CHATS} concurrent, whole stream", total, wall)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", default=os.environ.get("MARAG_DATA", "/work/shared/data"))
    args = parser.parse_args()
    data = Path(args.data)
    questions = [q["question"] for _, q in iter_jsonl(data / "hotpotqa.questions.jsonl")]
    with tempfile.TemporaryDirectory() as tmp:
        index = build_index(data / "hotpotqa.corpus.jsonl", Path(tmp) / "bm25", kind="bm25",
                            show_progress=False)
        port = free_port()
        proc = start(["serve-retriever", str(index)], port)
        try:
            asyncio.run(load_retriever(f"http://127.0.0.1:{port}", questions))
        finally:
            proc.terminate()
            proc.wait(20)

        from marag.llm.tiny import build_tiny_model

        model, tok = build_tiny_model(seed=0)
        folder = Path(tmp) / "tiny"
        model.save_pretrained(folder)
        tok.save_pretrained(folder)
        port = free_port()
        proc = start(["serve-llm", "--model", str(folder), "--served-model-name", "tiny",
                      "--threads", "1", "--max-batch-size", "32"], port)
        try:
            asyncio.run(load_llm(f"http://127.0.0.1:{port}"))
        finally:
            proc.terminate()
            proc.wait(20)


if __name__ == "__main__":
    main()
