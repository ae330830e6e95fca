"""IRCoT: retrieval interleaved with a chain of thought, one sentence at a time (Trivedi et
al., ACL 2023; the role, its prompt and its sentence rule: ``roles.ircot``).

1. Retrieve ``method.ircot_top_k`` paragraphs (K) with the question as the query.
2. Reason-step: the ``ircot`` role sees the question, every paragraph collected so far and
   the chain so far, and writes its next sentence.
3. A sentence that gives the answer ("So the answer is: X") ends the chain. Otherwise its
   retrieve-step searches K more paragraphs with the sentence as the query and adds the new
   ones (by id and by identical title and text) until ``method.ircot_max_paragraphs`` are
   held (the authors' 15); then step 2 again, at most ``method.ircot_steps`` sentences.
   A sentence that only reasons over what is known ("So ...", "Thus ...", "a + b = c"),
   or repeats a query already made, searches nothing: the authors' code would search the
   last factual sentence again (or the same text again), whose paragraphs are already held.
   So does every sentence once the cap is reached. An empty sentence ends the chain, as in
   the authors' code.
4. The answer (``method.ircot_answer``): ``reader`` (the paper's IRCoT QA and Adaptive-RAG's
   multi-step strategy): one more ``ircot`` call reads every collected paragraph and writes a
   chain afresh, whose "answer is" gives the answer (its whole line when it has none);
   ``direct`` (the paper's direct reader): the same call asked for the answer alone, its
   prompt a step's up to the question (so a prefix cache serves its paragraphs);
   ``cot`` (FlashRAG's pipeline): the chain's own answer, the reader only when the chain
   ended without one.

Each reasoning step is one ``ircot`` Step (its round and turn: the step number, with the
retrieval its sentence made); the first retrieval is turn 0 of round 1; the reader is a round
of its own.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from marag.roles.ircot import NAME, sentence_done
from marag.types import Passage
from marag.workflows.engine import Run

_REASONING = re.compile(r"^(?:thus\b|so\b|that is,|therefore\b|hence\b)", re.IGNORECASE)
_ARITHMETIC = re.compile(r"(\d[\d,]*\.?\d+|\d+) ([+-]) (\d[\d,]*\.?\d+|\d+) = (\d[\d,]*\.?\d+|\d+)")


def is_reasoning(sentence: str) -> bool:
    """A sentence that draws on what is already known (no new fact to search for): it opens
    with thus / so / that is / therefore / hence, or does an addition or subtraction."""
    s = sentence.strip()
    return bool(_REASONING.match(s) or _ARITHMETIC.search(s))


def _collect(held: list[Passage], seen: set[tuple[str, ...]], found: Sequence[Passage],
             cap: int) -> int:
    """Add the passages of ``found`` not held yet (same id, or same title and text) while
    fewer than ``cap`` are held; returns how many were added."""
    added = 0
    for p in found:
        if len(held) >= cap:
            break
        keys = (("id", p.id), ("text", p.title, p.text))
        if any(k in seen for k in keys):
            continue
        seen.update(keys)
        held.append(p)
        added += 1
    return added


async def ircot(run: Run) -> None:
    cfg = run.config.method
    root = run.add_node(run.trace.question)
    root.workflow = [NAME]
    question = root.question
    held: list[Passage] = []
    seen: set[tuple[str, ...]] = set()
    run.round = 1
    hits = await run.retrieve([question], cfg.ircot_top_k, root.id, turn=0)
    _collect(held, seen, hits[0].passages, cfg.ircot_max_paragraphs)
    queries = {question}
    thoughts: list[str] = []
    answer: str | None = None
    for step_no in range(1, cfg.ircot_steps + 1):
        run.round = step_no
        # a continued chain: the model may not close its turn before writing a token (a chat
        # model ends the turn after a full stop far more often than it starts a new sentence)
        # stop_when: the step keeps its line's first sentence, so the rest is not decoded
        p, _ = await run.call(NAME, root.id, turn=step_no, question=question, docs=held,
                              thoughts=thoughts,
                              sampling={"min_tokens": 1 if thoughts else 0,
                                        "stop_when": sentence_done})
        if not p.valid:
            run.note(f"ircot: step {step_no} wrote no usable sentence ({p.reason}); the chain "
                     "ends there")
            break
        sentence = p.value["sentence"]
        thoughts.append(sentence)
        if p.value["answer"] is not None:
            answer = p.value["answer"]
            break
        if step_no == cfg.ircot_steps:
            run.note(f"ircot: no answer after {cfg.ircot_steps} reasoning steps")
            break
        if (is_reasoning(sentence) or len(held) >= cfg.ircot_max_paragraphs
                or sentence in queries):
            continue
        queries.add(sentence)
        hits = await run.retrieve([sentence], cfg.ircot_top_k, root.id, turn=step_no)
        _collect(held, seen, hits[0].passages, cfg.ircot_max_paragraphs)
    if cfg.ircot_answer == "cot" and answer is not None:
        run.answer(root, answer)
        return
    run.round += 1
    direct = cfg.ircot_answer == "direct"
    # no later call repeats the reader's prompt: not kept (the direct reader still starts
    # from the last step's entry, which holds its paragraphs and question)
    p, _ = await run.call(NAME, root.id, turn=run.round, question=question, docs=held,
                          reader=not direct, direct=direct, sampling={"cache_prompt": False})
    run.answer(root, p.value["answer"])
