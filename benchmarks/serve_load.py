"""Loopback load test of ``marag serve`` against the scripted decomposing team (no model).

The server runs in a child process (uvicorn, as ``marag serve`` runs it) with a scripted team
that splits every question into two serial sub-questions (11 LLM calls, 2 BM25 retrievals
over wiki-demo per question; each LLM call sleeps ``--latency`` seconds). The client:

1. ``--asks`` POST /api/ask with ``--concurrency`` in flight: latency p50/p99, errors;
2. ``--subscribers`` concurrent POST /api/ask/stream: every stream must end with its trace;
   time to the first step event and to the end;
3. GET /health after each phase: no question left in flight and no asyncio task left over
   (the server's task count returns to its idle value);
4. in-process, no HTTP: the server's own per-step overhead, i.e. one question's wall time
   with the live listener (events encoded to JSON with the tree layout) minus without,
   divided by its steps; and the HTTP cost per question (phase 1's p50 at concurrency 1
   minus the in-process time).

    .venv/bin/python benchmarks/serve_load.py [--asks 200] [--concurrency 16] \
        [--subscribers 50] [--latency 0.01]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import os
import signal
import socket
import statistics
import time
from typing import Any

import httpx

QUESTION = "Where was the director of Inception born?"
SUBS = ["Who directed Inception?", "Where was he born?"]
REWRITE = {"Where was he born?": "Where was Christopher Nolan born?"}


def make_ctx(latency: float) -> Any:
    from marag.config import RetrievalConfig, load_config
    from marag.llm.scripted import decomposing
    from marag.retrieval import open_retriever
    from marag.workflows import Context

    llm = decomposing(SUBS, ["Christopher Nolan", "London"], "London", rewrites=REWRITE,
                      latency=latency)
    cfg = load_config(None, ["llms.default.backend=scripted"])
    return Context(llms={"default": llm}, config=cfg,
                   retriever=open_retriever(RetrievalConfig(index="wiki-demo")))


def serve(port: int, latency: float, limit: int) -> None:
    import logging

    import uvicorn

    from marag.web.app import create_app
    from marag.web.settings import ServeSettings

    logging.basicConfig(level=logging.WARNING)
    app = create_app(make_ctx(latency), ServeSettings(max_concurrent_asks=limit))
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, round(q / 100 * (len(xs) - 1)))]


async def asks(c: httpx.AsyncClient, n: int, concurrency: int) -> tuple[list[float], int]:
    sem = asyncio.Semaphore(concurrency)
    lat: list[float] = []
    errors = 0

    async def one(i: int) -> None:
        nonlocal errors
        async with sem:
            t0 = time.perf_counter()
            r = await c.post("/api/ask", json={"question": QUESTION, "id": f"b{i}",
                                               "golden_answers": ["London"]})
            lat.append(time.perf_counter() - t0)
            if r.status_code != 200 or r.json()["answer"] != "London":
                errors += 1

    await asyncio.gather(*(one(i) for i in range(n)))
    return lat, errors


async def streams(c: httpx.AsyncClient, n: int) -> tuple[list[float], list[float], int]:
    first: list[float] = []
    total: list[float] = []
    errors = 0

    async def one() -> None:
        nonlocal errors
        t0 = time.perf_counter()
        kinds = []
        async with c.stream("POST", "/api/ask/stream", json={"question": QUESTION}) as r:
            if r.status_code != 200:
                errors += 1
                return
            buf = ""
            async for chunk in r.aiter_text():
                buf += chunk
                while "\n\n" in buf:
                    block, buf = buf.split("\n\n", 1)
                    kind = block.split("\n", 1)[0][7:]
                    if kind == "step" and "step" not in kinds:
                        first.append(time.perf_counter() - t0)
                    kinds.append(kind)
                    if kind == "trace":
                        data = json.loads(block.split("\n", 1)[1][6:])
                        if data["trace"]["answer"] != "London":
                            errors += 1
        total.append(time.perf_counter() - t0)
        if not kinds or kinds[-1] != "trace":
            errors += 1

    await asyncio.gather(*(one() for _ in range(n)))
    return first, total, errors


async def overhead(reps: int, latency: float) -> dict[str, float]:
    from marag.types import Question
    from marag.web.live import LiveQuestion
    from marag.workflows import run_method

    ctx = make_ctx(0.0)

    async def once(live: bool) -> tuple[float, int]:
        lq = LiveQuestion()
        c = ctx.listening(lq) if live else ctx
        t0 = time.perf_counter()
        t = await run_method("jade", Question("x", QUESTION), c)
        dt = time.perf_counter() - t0
        return dt, len(t.steps)

    for live in (False, True):  # warm up caches and the index
        await once(live)
    plain, with_live = [], []
    for _ in range(reps):  # interleaved, best of: both sides see the same box load
        plain.append((await once(False))[0])
        dt, steps = await once(True)
        with_live.append(dt)
    p, w = min(plain), min(with_live)
    slow = make_ctx(latency)  # as the server runs it, for the HTTP cost per question
    at_latency = []
    for _ in range(10):
        t0 = time.perf_counter()
        await run_method("jade", Question("x", QUESTION), slow)
        at_latency.append(time.perf_counter() - t0)
    return {"steps": steps, "plain_ms": 1e3 * p, "live_ms": 1e3 * w,
            "per_step_us": 1e6 * (w - p) / steps,
            "at_latency_ms": 1e3 * statistics.median(at_latency)}


async def health(c: httpx.AsyncClient) -> dict[str, Any]:
    return (await c.get("/health")).json()


async def main(args: argparse.Namespace) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = mp.get_context("spawn").Process(
        target=serve, args=(port, args.latency, max(args.concurrency, args.subscribers)))
    proc.start()
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=120,
                                     limits=httpx.Limits(max_connections=200)) as c:
            for _ in range(600):
                try:
                    idle = await health(c)
                    break
                except httpx.TransportError:
                    await asyncio.sleep(0.1)
            await asks(c, 4, 1)  # warm-up
            idle = await health(c)
            seq, _ = await asks(c, 20, 1)
            t0 = time.perf_counter()
            lat, errors = await asks(c, args.asks, args.concurrency)
            wall = time.perf_counter() - t0
            after_asks = await health(c)
            t0 = time.perf_counter()
            first, total, serr = await streams(c, args.subscribers)
            swall = time.perf_counter() - t0
            await asyncio.sleep(0.2)
            after_streams = await health(c)
    finally:
        os.kill(proc.pid, signal.SIGINT)  # uvicorn's graceful shutdown, as Ctrl-C
        proc.join(10)
    ov = await overhead(args.reps, args.latency)
    print(f"server idle: {idle}")
    print(f"asks, 1 in flight: p50 {1e3 * statistics.median(seq):.1f} ms "
          f"(in-process p50 {ov['at_latency_ms']:.1f} ms -> HTTP + JSON "
          f"{1e3 * statistics.median(seq) - ov['at_latency_ms']:.1f} ms per question)")
    print(f"asks: {args.asks} x {args.concurrency} concurrent: {errors} errors, "
          f"{args.asks / wall:.1f} questions/s, p50 {1e3 * pct(lat, 50):.1f} ms, "
          f"p99 {1e3 * pct(lat, 99):.1f} ms; after: {after_asks}")
    print(f"streams: {args.subscribers} concurrent: {serr} errors, first step p50 "
          f"{1e3 * pct(first, 50):.1f} ms p99 {1e3 * pct(first, 99):.1f} ms, end p50 "
          f"{1e3 * pct(total, 50):.1f} ms p99 {1e3 * pct(total, 99):.1f} ms, "
          f"{swall:.2f} s wall; after: {after_streams}")
    print(f"live listener overhead (in-process, best of {args.reps}): {ov['steps']} steps, "
          f"{ov['plain_ms']:.2f} ms -> {ov['live_ms']:.2f} ms per question = "
          f"{ov['per_step_us']:.0f} us per step")
    leaked = (after_asks["asks_in_flight"], after_streams["asks_in_flight"],
              after_streams["tasks"] - idle["tasks"])
    if errors or serr or any(leaked):
        raise SystemExit(f"FAILED: {errors} ask errors, {serr} stream errors, leaked {leaked}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--asks", type=int, default=200)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--subscribers", type=int, default=50)
    ap.add_argument("--latency", type=float, default=0.01)
    ap.add_argument("--reps", type=int, default=30)
    asyncio.run(main(ap.parse_args()))
