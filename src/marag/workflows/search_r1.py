"""Search-R1: one LLM alternates reasoning, ``<search>`` calls and reading ``<information>``
until it writes ``<answer>`` (Jin et al., 2025; the role and its tags: ``roles.search_r1``).

Each call continues one growing assistant text: the model's turns and, after each, either the
search results or a correction note. ``method.search_turns`` calls may search (the paper's
4); one more call follows the last search and must answer, as in the paper's final rollout.
Every call is one ``search-r1`` Step (its turn number, validity and why not); every search one
``R`` Step. A trajectory that never answers ends with the answer "" (F1 0) and a note saying
why: each turn's fault is on its own Step.
"""

from __future__ import annotations

from marag.roles.search_r1 import INVALID_NOTE, NAME, information
from marag.workflows.engine import Run


async def search_r1(run: Run) -> None:
    cfg = run.config.method
    root = run.add_node(run.trace.question)
    root.workflow = [NAME]
    transcript = ""
    last = cfg.search_turns + 1
    for turn in range(1, last + 1):
        run.round = turn
        p, step = await run.call(NAME, root.id, turn=turn, question=root.question,
                                 transcript=transcript)
        action, content = p.value["action"], p.value["content"]
        if p.valid and action == "answer":
            run.answer(root, content)
            return
        if turn == last:
            if p.valid:  # a search on the last call: nothing is searched any more
                step.valid = False
                step.reason = (f"searched on the last call: the budget of "
                               f"{cfg.search_turns} searches was spent")
            break
        transcript += step.raw
        if p.valid:
            hits = await run.retrieve([content], cfg.search_top_k, root.id, turn=turn)
            transcript += information(hits[0].passages)
        else:
            transcript += INVALID_NOTE
    run.note(f"search-r1: no <answer> in {last} calls ({cfg.search_turns} searches allowed)")
    run.answer(root, "")
