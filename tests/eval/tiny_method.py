"""A small but real retrieve-then-answer method for evaluator tests (not the workflow engine).

It retrieves top-k passages, asks the LLM (role ``AG``) for ``<answer>…</answer>`` and
records Steps and Cost the way methods do, so the evaluator is tested on genuine traces.
"""

from __future__ import annotations

import re
import time
from typing import Any

from marag.llm.base import SamplingParams, current_role
from marag.types import Node, Question, Step, Trace

ANSWER = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)


async def tiny_rag(question: Question, ctx: Any) -> Trace:
    """``ctx`` needs ``.llm`` (an LLM) and ``.retriever`` (a Retriever or None)."""
    t0 = time.perf_counter()
    trace = Trace(id=question.id, question=question.question, method="tiny-rag",
                  golden_answers=list(question.golden_answers), dataset=question.dataset,
                  nodes=[Node(id=0, question=question.question)])
    docs = ""
    if ctx.retriever is not None:
        hits = (await ctx.retriever.search([question.question], 3))[0]
        trace.steps.append(Step(role="R", doc_ids=hits.ids))
        trace.cost.retrieval_calls += 1
        docs = "\n".join(f"Document{i}: {p.contents}" for i, p in enumerate(hits.passages))
    messages = [{"role": "user", "content": f"{docs}\nQuestion: {question.question}"}]
    token = current_role.set("AG")
    try:
        out = (await ctx.llm.generate([messages], SamplingParams(max_tokens=32)))[0]
    finally:
        current_role.reset(token)
    m = ANSWER.search(out.text)
    answer = m.group(1).strip() if m else out.text.strip()
    trace.steps.append(Step(role="AG", messages=messages, raw=out.text, parsed=answer,
                            valid=m is not None, reason="" if m else "no <answer> tag",
                            prompt_tokens=out.prompt_tokens,
                            completion_tokens=out.completion_tokens))
    trace.cost.llm_calls += 1
    trace.cost.prompt_tokens += out.prompt_tokens
    trace.cost.completion_tokens += out.completion_tokens
    trace.cost.rounds = 1
    trace.answer = answer
    trace.nodes[0].answer = answer
    trace.cost.seconds = time.perf_counter() - t0
    return trace


def first_title_answer(messages: list[dict[str, str]]) -> str:
    """Scripted AG reply: the title of the first retrieved document, in answer tags."""
    m = re.search(r'Document0: "([^"]*)"', messages[-1]["content"])
    return f"<answer>{m.group(1) if m else 'unknown'}</answer>"
