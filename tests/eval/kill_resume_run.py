"""Subprocess body for the kill-and-resume test: a real evaluation that is slow enough to kill.

Runs the real ``vanilla`` workflow (engine, AG role prompt and parser, BM25 retrieval over a
real corpus) with a ScriptedLLM that waits ``latency`` seconds per call, because a test must
not need a network model. Usage: python kill_resume_run.py OUT INDEX QUESTIONS N LATENCY
"""

from __future__ import annotations

import asyncio
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from conftest import read_questions
from marag.config import Config
from marag.eval import evaluate
from marag.llm.scripted import ScriptedLLM
from marag.retrieval import open_index
from marag.workflows import Context, run_method

DOC0 = re.compile(r"Document0: \(([^)]*)\)")


def first_doc_title(messages: list[dict[str, str]]) -> str:
    # The prompt's worked example also has a Document0; the question's documents come last.
    titles = DOC0.findall(messages[-1]["content"])
    return f"<answer>{titles[-1] if titles else 'unknown'}</answer>"


async def vanilla(question, ctx):
    return await run_method("vanilla", question, ctx)


async def main(out: str, index: str, questions: str, n: int, latency: float) -> None:
    config = Config.model_validate({"method": {"name": "vanilla", "top_k": 3}})
    llm = ScriptedLLM({"AG": first_doc_title}, latency=latency)
    ctx = Context(llms={"default": llm}, config=config, retriever=open_index(index))
    qs = read_questions(Path(questions), n)
    await evaluate(qs, vanilla, ctx, out, method_name="vanilla", concurrency=2,
                   identity={"dataset": questions})
    await ctx.aclose()


if __name__ == "__main__":
    a = sys.argv[1:]
    asyncio.run(main(a[0], a[1], a[2], int(a[3]), float(a[4])))
