"""Self-RAG short-form inference for its released checkpoints (Asai et al., ICLR 2024; the
prompt, the reflection tokens and the scores: ``roles.self_rag``).

1. Decide (``method.self_rag_mode: adaptive``): one ``self-rag`` call on the bare prompt, one
   token long (FlashRAG's ``judge_retrieve``). With token probabilities and
   ``method.self_rag_threshold`` set, it retrieves when P([Retrieval]) / (P([Retrieval]) +
   P([No Retrieval])) at that token is above the threshold; otherwise when the token written
   is ``[Retrieval]``. ``always`` and ``never`` skip the call.
2. Retrieving: the top ``method.self_rag_top_k`` passages for the question, each continued on
   its own (``[Retrieval]<paragraph>...</paragraph>``, concurrently); each continuation is
   scored by its reflection tokens (``roles.self_rag.critique``: relevance, support,
   utility, and the mean token probability with ``method.self_rag_seqscore``), and the best
   one (the first of equals) is the answer, reflection tokens stripped.
3. Not retrieving: one call continuing ``[No Retrieval]``; its text is the answer.

Token probabilities come from the backend (the openai backend's ``llms.<name>.top_logprobs``);
without them the reflection tokens the model wrote are read as certain, and the trace says so.
The alternatives are read once and dropped from each Step (a trace keeps the scores in
``parsed["critique"]``), so that traces stay small. Every call is one Step: the decision turn
0 of round 1, the passages' continuations turns 1..k of round 2 (one ``R`` Step before them),
the continuation without retrieval turn 1 of round 2.
"""

from __future__ import annotations

from typing import Any

from marag.roles.self_rag import NAME, critique, retrieval_probability
from marag.types import Passage, Step
from marag.workflows.engine import Run, gather_branches

# the decision reads the first generated token only (FlashRAG: max_tokens=1)
DECIDE_TOKENS = 1


def _take_top(step: Step) -> list[dict[str, Any]] | None:
    """The step's per-token alternatives, removed from the record."""
    top, step.top_logprobs = step.top_logprobs, None
    return top


async def _decide(run: Run, question: str, node: int, instruction: str) -> bool:
    cfg = run.config.method
    if cfg.self_rag_mode != "adaptive":
        return cfg.self_rag_mode == "always"
    p, step = await run.call(NAME, node, turn=0, sampling={"max_tokens": DECIDE_TOKENS},
                             question=question, instruction=instruction)
    prob = retrieval_probability(_take_top(step))
    if prob is not None and cfg.self_rag_threshold is not None:
        retrieve = prob > cfg.self_rag_threshold
        how = {"p_retrieval": prob, "threshold": cfg.self_rag_threshold, "from": "logprobs"}
    else:
        retrieve = bool(p.value["retrieve"])
        how = {"p_retrieval": prob, "threshold": None, "from": "text"}
        if prob is None:
            run.note("self-rag: no token probabilities from the backend; the decision reads "
                     "the token written (llms.<name>.top_logprobs gives them)")
    step.parsed = {**p.value, "retrieve": retrieve, "decision": how}
    return retrieve


async def self_rag(run: Run) -> None:
    cfg = run.config.method
    root = run.add_node(run.trace.question)
    root.workflow = [NAME]
    question, instruction = root.question, cfg.self_rag_instruction
    run.round = 1
    retrieve = await _decide(run, question, root.id, instruction)
    run.round = 2
    if not retrieve:
        root.workflow.append("no retrieval")
        p, step = await run.call(NAME, root.id, turn=1, question=question,
                                 instruction=instruction, no_retrieval=True)
        _take_top(step)
        run.answer(root, p.value["answer"])
        return
    root.workflow.append("retrieval")
    hits = await run.retrieve([question], cfg.self_rag_top_k, root.id)
    passages = hits[0].passages
    if not passages:
        run.note("self-rag: the retriever found no passage; nothing to continue")
        run.answer(root, "")
        return

    def job(i: int, passage: Passage) -> Any:
        async def one(branch: Run) -> tuple[float, str]:
            p, step = await branch.call(NAME, root.id, turn=i, question=question,
                                        instruction=instruction, passage=passage)
            score = critique(p.value, _take_top(step), step.logprobs, w_rel=cfg.self_rag_w_rel,
                             w_sup=cfg.self_rag_w_sup, w_use=cfg.self_rag_w_use,
                             seqscore=cfg.self_rag_seqscore)
            step.parsed = {**p.value, "critique": score}
            return score["score"], p.value["answer"]
        return one

    results = await gather_branches(run, [job(i, p) for i, p in enumerate(passages, 1)])
    best = max(range(len(results)), key=lambda i: results[i][0])
    if all(s.parsed.get("critique", {}).get("from") == "text"
           for s in run.steps if s.role == NAME and s.turn >= 1):
        run.note("self-rag: no token probabilities from the backend; each continuation is "
                 "scored by the reflection tokens it wrote (llms.<name>.top_logprobs gives "
                 "them)")
    run.note(f"self-rag: passage {best + 1} of {len(results)} scored best "
             f"({results[best][0]:.3f})")
    run.answer(root, results[best][1])
