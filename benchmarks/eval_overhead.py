"""Evaluator overhead: what marag eval itself costs per question, apart from the method.

Runs the real ``vanilla`` workflow (engine, AG prompt and parser, BM25 over the HotpotQA
corpus) with a zero-latency ScriptedLLM over every shared question, so the traces are real
in shape and size; then times a resume of the finished run (nothing to do) and a
recomputation of the summary from traces.jsonl.

    .venv/bin/python benchmarks/eval_overhead.py [--data ../shared/data] [--concurrency 8]
"""

from __future__ import annotations

import argparse
import asyncio
import re
import tempfile
import time
from pathlib import Path

from marag.config import Config
from marag.datasets import load_questions
from marag.eval import evaluate, load_run
from marag.llm.scripted import ScriptedLLM
from marag.retrieval import build_index, open_index
from marag.workflows import Context, run_method

DOC0 = re.compile(r"Document0: \(([^)]*)\)")
SETS = ("hotpotqa", "2wikimultihopqa", "musique", "nq_open")


def first_doc_title(messages):
    titles = DOC0.findall(messages[-1]["content"])
    return f"<answer>{titles[-1] if titles else 'unknown'}</answer>"


async def vanilla(question, ctx):
    return await run_method("vanilla", question, ctx)


async def main(data: Path, concurrency: int) -> None:
    questions = [q for name in SETS for q in load_questions(data / f"{name}.questions.jsonl")]
    with tempfile.TemporaryDirectory() as tmp:
        index = build_index(data / "hotpotqa.corpus.jsonl", Path(tmp) / "idx", kind="bm25",
                            show_progress=False)
        config = Config.model_validate({"method": {"name": "vanilla", "top_k": 5}})
        ctx = Context(llms={"default": ScriptedLLM({"AG": first_doc_title})}, config=config,
                      retriever=open_index(index))
        out = Path(tmp) / "run"
        t0 = time.perf_counter()
        res = await evaluate(questions, vanilla, ctx, out, method_name="vanilla",
                             concurrency=concurrency)
        full = time.perf_counter() - t0
        t0 = time.perf_counter()
        again = await evaluate(questions, vanilla, ctx, out, method_name="vanilla",
                               concurrency=concurrency)
        resume = time.perf_counter() - t0
        t0 = time.perf_counter()
        loaded = load_run(out)
        reload = time.perf_counter() - t0
        size = (out / "traces.jsonl").stat().st_size
    assert again.ran == 0 and loaded.summary["n"] == len(questions)
    n = len(questions)
    print(f"questions: {n}, traces.jsonl {size / 1e6:.1f} MB, failed {res.summary['failed']}")
    print(f"full run (vanilla engine + BM25 + scripted LLM, one fsync per write batch): {full:.2f} s "
          f"= {n / full:.0f} questions/s")
    print(f"resume of the finished run (read, check, summarize, write): {resume:.2f} s")
    print(f"load_run + summarize from traces.jsonl: {reload:.2f} s")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path,
                    default=Path(__file__).resolve().parents[1].parent / "shared" / "data")
    ap.add_argument("--concurrency", type=int, default=8)
    a = ap.parse_args()
    asyncio.run(main(a.data, a.concurrency))
