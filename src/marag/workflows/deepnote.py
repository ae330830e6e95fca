"""DeepNote: a note, rewritten while new retrievals add to it and kept only when it got
better (Wang et al., 2024; the authors' code thunlp/Adaptive-Note, ``src/main.py``
``retrieve_note``; the roles and prompts: ``roles.deepnote``).

1. Round 1: ``method.deepnote_top_k`` passages for the question; ``deepnote.init`` writes the
   first note from them. It is the best note.
2. Each later round is one update step, at most ``method.deepnote_max_steps``:
   ``deepnote.query`` writes new queries from the question, the best note and the queries
   written so far; the queries and the question (one text, cut to 500 characters, as the
   authors search) retrieve ``deepnote_top_k`` passages; ``deepnote.update`` adds what they
   say to the best note; ``deepnote.compare`` says whether the updated note is better than the
   best one. A better note becomes the best; a note that is not better is a failed update.
3. The loop stops after ``method.deepnote_max_failures`` failed updates (1: the first note that
   is not better, the adaptive stop), after the last step, or once
   ``method.deepnote_max_passages`` distinct passages have been collected (checked before each
   step; a retrieval that would pass the cap keeps only unseen passages, up to the cap).
4. ``deepnote.answer`` answers from the best note.

An update that writes no note counts as a failed update without a comparison (an empty note
cannot be better). Every LLM call is one Step (round: its step + 1, turn: its step; the first
note is turn 0 of round 1, the answer a round of its own) and every retrieval one ``R`` Step;
malformed outputs are recorded invalid on their own Step.
"""

from __future__ import annotations

from collections.abc import Sequence

from marag.roles.deepnote import ANSWER, COMPARE, INIT, QUERY, UPDATE
from marag.types import Passage
from marag.workflows.engine import Run

# the authors cut the retrieval text (queries + question) to 500 characters
MAX_SEARCH_CHARS = 500


def search_text(queries: Sequence[str], question: str) -> str:
    """What one update step searches: its queries, then the question, cut as the authors cut
    it; the question alone when the step wrote no query."""
    return "\n".join([*queries, question])[:MAX_SEARCH_CHARS]


def _key(p: Passage) -> tuple[str, str]:
    return (p.title, p.text)


async def deepnote(run: Run) -> None:
    cfg = run.config.method
    k = cfg.deepnote_top_k
    root = run.add_node(run.trace.question)
    root.workflow = ["note"]
    question = root.question
    run.round = 1
    hits = await run.retrieve([question], k, root.id, turn=0)
    seen = {_key(p) for p in hits[0].passages}
    first, _ = await run.call(INIT, root.id, turn=0, question=question, docs=hits[0].passages)
    best = first.value
    history: list[str] = []
    failures = kept = 0
    for step in range(1, cfg.deepnote_max_steps + 1):
        if len(seen) >= cfg.deepnote_max_passages:
            run.note(f"deepnote: {len(seen)} passages collected (the cap is "
                     f"{cfg.deepnote_max_passages}); no more updates")
            break
        run.round = step + 1
        room = cfg.deepnote_max_passages - len(seen)
        q, _ = await run.call(QUERY, root.id, turn=step, question=question, note=best,
                              history=list(history))
        history.extend(q.value)
        root.workflow.append("update")
        hits = await run.retrieve([search_text(q.value, question)], k, root.id, turn=step)
        docs = list(hits[0].passages)
        if len(seen) + k > cfg.deepnote_max_passages:
            docs = [p for p in docs if _key(p) not in seen][:room]
        seen.update(_key(p) for p in docs)
        new, _ = await run.call(UPDATE, root.id, turn=step, question=question, note=best,
                                docs=docs)
        if new.value:
            verdict, _ = await run.call(COMPARE, root.id, turn=step, question=question,
                                        best=best, new=new.value)
            better = verdict.value is True
        else:
            run.note(f"deepnote: step {step} wrote no note ({new.reason}); a failed update")
            better = False
        if better:
            best, kept = new.value, kept + 1
        else:
            failures += 1
            if failures >= cfg.deepnote_max_failures:
                break
    run.round += 1
    a, _ = await run.call(ANSWER, root.id, turn=run.round, question=question, note=best)
    run.note(f"deepnote: {kept} update(s) kept, {failures} not")
    run.answer(root, a.value)
