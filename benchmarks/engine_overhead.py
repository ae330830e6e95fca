"""Workflow engine overhead and concurrency.

1. Overhead per step: jade on a parallel-decomposition script (planner, QDP, four children
   each planned and answered, AS: 11 LLM steps, no retrieval) against a zero-latency scripted
   backend, questions run one after another. Reports wall time per step, split into the
   roles' own prompt building + parsing, the scripted backend, and what remains (the engine).
2. Throughput: the same script against a backend that sleeps ``--latency`` seconds per call,
   with 1, 8, 32, 128 questions in flight (a semaphore, as the evaluator does). The ideal is
   concurrency / (sequential LLM calls per question x latency): 5 sequential calls here
   (plan, QDP, the children's plan and answer in parallel, AS).

    .venv/bin/python benchmarks/engine_overhead.py [--latency 0.25] [--per-slot 4]
"""

from __future__ import annotations

import argparse
import asyncio
import time

from marag.config import load_config
from marag.llm.scripted import ScriptedLLM
from marag.roles.base import Role
from marag.types import Question
from marag.workflows import Context, run_method

SEQUENTIAL_CALLS = 5
ROOT = "Which performance act has a higher instrument to person ratio, Badly Drawn Boy or Wolf Alice?"
SUBS = ["How many members are in Badly Drawn Boy?", "How many instruments does Badly Drawn Boy use?",
        "How many members are in Wolf Alice?", "How many instruments does Wolf Alice use?"]


def script(latency: float) -> ScriptedLLM:
    return ScriptedLLM({
        "planner": lambda m: ("<workflow>QDP</workflow>" if ROOT in m[-1]["content"]
                              else "<workflow>AG</workflow>"),
        "QDP": "".join(f"<q{i}>{q}</q{i}>" for i, q in enumerate(SUBS, 1)),
        "AG": "<answer>Four</answer>",
        "AS": "<answer>Badly Drawn Boy</answer>",
    }, latency=latency)


def context(llm: ScriptedLLM) -> Context:
    cfg = load_config(None, ["llms.default.backend=scripted"])
    return Context(llms={"default": llm}, config=cfg)


class Timer:
    def __init__(self) -> None:
        self.roles = 0.0
        self.backend = 0.0

    def wrap_roles(self, ctx: Context, names: list[str]) -> None:
        for name in names:
            route = ctx.route(name)
            r = route.role
            route.role = Role(name=r.name, build=self._timed(r.build, "roles"),
                              parse=self._timed(r.parse, "roles"), max_tokens=r.max_tokens,
                              stop=r.stop)

    def wrap_backend(self, llm: ScriptedLLM) -> None:
        inner = llm.generate

        async def generate(batch, params):  # type: ignore[no-untyped-def]
            t = time.perf_counter()
            out = await inner(batch, params)
            self.backend += time.perf_counter() - t
            return out

        llm.generate = generate  # type: ignore[method-assign]

    def _timed(self, fn, field):  # type: ignore[no-untyped-def]
        def timed(*a, **k):  # type: ignore[no-untyped-def]
            t = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                setattr(self, field, getattr(self, field) + time.perf_counter() - t)

        return timed


async def overhead(n: int) -> dict[str, float]:
    llm = script(0.0)
    ctx = context(llm)
    for i in range(20):  # warm-up
        await run_method("jade", Question(f"w{i}", ROOT), ctx)
    timer = Timer()
    timer.wrap_roles(ctx, ["planner", "QDP", "AG", "AS"])
    timer.wrap_backend(llm)
    steps = 0
    t0 = time.perf_counter()
    for i in range(n):
        t = await run_method("jade", Question(f"q{i}", ROOT), ctx)
        assert t.status == "ok", t.error
        steps += len(t.steps)
    wall = time.perf_counter() - t0
    per = 1e3 / steps
    return {"steps": steps, "total_ms": wall * per, "roles_ms": timer.roles * per,
            "backend_ms": timer.backend * per,
            "engine_ms": (wall - timer.roles - timer.backend) * per}


async def throughput(concurrency: int, per_slot: int, latency: float) -> dict[str, float]:
    llm = script(latency)
    ctx = context(llm)
    n = concurrency * per_slot
    sem = asyncio.Semaphore(concurrency)

    async def one(i: int) -> int:
        async with sem:
            t = await run_method("jade", Question(f"q{i}", ROOT), ctx)
        assert t.status == "ok", t.error
        return t.cost.llm_calls

    t0 = time.perf_counter()
    calls = sum(await asyncio.gather(*(one(i) for i in range(n))))
    wall = time.perf_counter() - t0
    ideal = concurrency / (SEQUENTIAL_CALLS * latency)
    return {"questions": n, "wall": wall, "qps": n / wall, "ideal": ideal,
            "ratio": n / wall / ideal, "calls_per_s": calls / wall}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--latency", type=float, default=0.25, help="seconds per scripted call")
    ap.add_argument("--per-slot", type=int, default=4, help="questions per concurrency slot")
    ap.add_argument("--overhead-questions", type=int, default=500)
    args = ap.parse_args()
    o = asyncio.run(overhead(args.overhead_questions))
    print(f"overhead: {o['steps']:.0f} steps; per step {o['total_ms']:.3f} ms = roles "
          f"{o['roles_ms']:.3f} + scripted backend {o['backend_ms']:.3f} + engine "
          f"{o['engine_ms']:.3f}")
    print(f"\nlatency {args.latency * 1e3:.0f} ms/call, {SEQUENTIAL_CALLS} sequential calls "
          "(11 calls) per question")
    print("| concurrency | questions | wall s | questions/s | ideal q/s | ratio | LLM calls/s |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for c in (1, 8, 32, 128):
        r = asyncio.run(throughput(c, args.per_slot, args.latency))
        print(f"| {c} | {r['questions']} | {r['wall']:.2f} | {r['qps']:.2f} | {r['ideal']:.2f} | "
              f"{r['ratio']:.3f} | {r['calls_per_s']:.1f} |")


if __name__ == "__main__":
    main()
