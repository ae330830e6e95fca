"""Throughput and latency of the retrieval server against in-process BM25.

Builds a BM25 index over the shared HotpotQA corpus, starts ``marag serve-retriever`` in a
separate process on 127.0.0.1, and retrieves top-5 for all 1,900 shared questions:

1. in process: ``search_batch`` in batches of 64 (the floor), one query per call, and one
   query per submit through the server's ``Coalescer`` (16 in flight, no HTTP);
2. through ``RetrieverClient.search_batch`` (sync, 64 queries per request);
3. one query per call, 16 in flight, with ``RetrieverClient.search`` (async; the client merges
   concurrent calls into shared requests) - the pattern
   of agents retrieving for their own sub-questions; reports per-request latency too.

Run: .venv/bin/python benchmarks/retrieval_server.py
"""

from __future__ import annotations

import asyncio
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from marag.retrieval import build_index, open_index
from marag.retrieval.client import RetrieverClient
from marag.types import iter_jsonl

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
K = 5


def questions() -> list[str]:
    out = []
    for name in ("hotpotqa", "2wikimultihopqa", "musique", "nq_open"):
        out += [obj["question"] for _, obj in iter_jsonl(DATA / f"{name}.questions.jsonl")]
    return out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_healthy(url: str, proc: subprocess.Popen, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}")
        try:
            if httpx.get(url + "/health", timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    raise RuntimeError("server did not become healthy")


async def one_per_request(client: RetrieverClient, qs: list[str], inflight: int) -> list[float]:
    gate = asyncio.Semaphore(inflight)
    latencies: list[float] = []

    async def one(q: str) -> None:
        async with gate:
            t = time.perf_counter()
            await client.search([q], K)
            latencies.append(time.perf_counter() - t)

    await asyncio.gather(*(one(q) for q in qs))
    return latencies


async def merged(index, qs: list[str]) -> tuple[float, int]:
    """One-query submits, 16 in flight, through the server's Coalescer without HTTP."""
    from marag.retrieval.coalesce import Coalescer
    from marag.retrieval.server import run_search

    async def search(queries: list[str], k: int) -> list:
        return run_search(index, queries, k)

    coalescer = Coalescer(search, concurrency=1)
    gate = asyncio.Semaphore(16)

    async def one(q: str) -> None:
        async with gate:
            await coalescer.submit([q], K)

    t = time.perf_counter()
    await asyncio.gather(*(one(q) for q in qs))
    return time.perf_counter() - t, coalescer.calls


def main() -> None:
    qs = questions()
    with tempfile.TemporaryDirectory() as tmp:
        index_dir = build_index(DATA / "hotpotqa.corpus.jsonl", Path(tmp) / "bm25", kind="bm25",
                                show_progress=False)
        index = open_index(index_dir)
        index.search_batch(qs[:64], K)  # warm the memory maps
        t = time.perf_counter()
        local = [h for i in range(0, len(qs), 64) for h in index.search_batch(qs[i : i + 64], K)]
        local_s = time.perf_counter() - t
        t = time.perf_counter()
        for q in qs:
            index.search_batch([q], K)
        singles_s = time.perf_counter() - t
        merged_s, merged_calls = asyncio.run(merged(index, qs))
        index.close()

        port = free_port()
        url = f"http://127.0.0.1:{port}"
        proc = subprocess.Popen(
            [sys.executable, "-m", "marag.cli", "serve-retriever", str(index_dir), "--port", str(port)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        try:
            wait_healthy(url, proc)
            client = RetrieverClient(url, batch_size=64)
            client.search_batch(qs[:64], K)
            t = time.perf_counter()
            remote = client.search_batch(qs, K)
            batch_s = time.perf_counter() - t
            assert [h.ids for h in remote] == [h.ids for h in local], "HTTP results differ from local"
            assert [h.scores for h in remote] == [h.scores for h in local]

            async def run_async() -> tuple[float, list[float]]:
                t0 = time.perf_counter()
                lat = await one_per_request(client, qs, 16)
                elapsed = time.perf_counter() - t0
                await client.aclose()
                return elapsed, lat

            single_s, lat = asyncio.run(run_async())
        finally:
            proc.terminate()
            proc.wait(10)

    n = len(qs)
    lat_ms = sorted(x * 1000 for x in lat)
    print(f"questions: {n}, k={K}, corpus: hotpotqa (4,858 passages)")
    print(f"in-process search_batch(64):         {local_s:.2f} s = {n / local_s:.0f} q/s")
    print(f"in-process search_batch(1) per query: {singles_s:.2f} s = {n / singles_s:.0f} q/s")
    print(f"in-process Coalescer, 1 per submit, 16 in flight: {merged_s:.2f} s = {n / merged_s:.0f} q/s "
          f"in {merged_calls} search calls")
    print(f"HTTP /retrieve, 64 per request:      {batch_s:.2f} s = {n / batch_s:.0f} q/s (same ids and scores)")
    print(f"HTTP RetrieverClient.search, 1 query per call, 16 in flight: {single_s:.2f} s = {n / single_s:.0f} q/s, "
          f"latency p50 {statistics.median(lat_ms):.1f} ms, p95 {lat_ms[int(0.95 * len(lat_ms))]:.1f} ms")


if __name__ == "__main__":
    main()
