"""Search-o1: a reasoning model searches in the middle of its reasoning, and a separate
Reason-in-Documents call of the same model condenses what each search found before it goes
into the reasoning (Li et al., 2025; the roles, prompts and markers: ``roles.search_o1``).

Each ``search-o1`` call continues one growing assistant text (the model's turns and what was
inserted after each query). A turn that ends in ``<|end_search_query|>`` searches: the top
``method.search_o1_top_k`` passages (the authors' 10) are retrieved, ``search-o1.rid`` reads
them with the previous reasoning steps and the query, and its extraction is inserted between
``<|begin_search_result|>`` and ``<|end_search_result|>``; the reasoning then goes on. After
``method.search_o1_max_searches`` searches (the authors' 10 for multi-hop QA, 5 for NQ and
TriviaQA) a further query is refused with a note in the same markers, and so is a query
already searched (no retrieval either way). A turn that ends without a query is the last:
its ``\\boxed{...}`` is the answer. The chain also ends at an unreadable turn, or after
``method.search_o1_max_turns`` calls (the authors' MAX_TURN, 15); the answer is then the last
``\\boxed{...}`` the model wrote in any turn (the authors read it from the whole output), else
"" (F1 0) with a trace note.

Every call is one Step (``search-o1`` with its turn number, validity and why not;
``search-o1.rid`` with the turn of its search) and every search one ``R`` Step; a search past
the limit is recorded invalid on its turn.
"""

from __future__ import annotations

from marag.roles.search_o1 import (
    LIMIT_NOTE,
    NAME,
    REPEAT_NOTE,
    RID,
    boxed,
    previous_steps,
    refusal,
    result,
)
from marag.workflows.engine import Run


async def search_o1(run: Run) -> None:
    cfg = run.config.method
    limit, turns = cfg.search_o1_max_searches, cfg.search_o1_max_turns
    root = run.add_node(run.trace.question)
    root.workflow = [NAME]
    transcript = ""
    own: list[str] = []  # the model's own turns, for the answer when the last has none
    searched: set[str] = set()
    why = f"no final answer in {turns} turns"
    for turn in range(1, turns + 1):
        run.round = turn
        p, step = await run.call(NAME, root.id, turn=turn, question=root.question,
                                 transcript=transcript, max_searches=limit)
        action, content = p.value["action"], p.value["content"]
        own.append(step.raw)
        if p.valid and action == "answer":
            run.answer(root, content)
            return
        if not (p.valid and action == "search"):
            why = f"turn {turn} ended the reasoning without an answer: {p.reason}"
            break
        transcript += step.raw
        if len(searched) >= limit:
            step.valid = False
            step.reason = f"searched past the limit of {limit} searches (refused)"
            transcript += refusal(LIMIT_NOTE)
            continue
        if content in searched:
            transcript += refusal(REPEAT_NOTE)
            continue
        searched.add(content)
        hits = await run.retrieve([content], cfg.search_o1_top_k, root.id, turn=turn)
        info, _ = await run.call(RID, root.id, turn=turn, prev_reasoning=previous_steps(transcript),
                                 query=content, docs=hits[0].passages)
        transcript += result(info.value)
    earlier = boxed("\n".join(own))
    if earlier:
        run.note(f"search-o1: {why}; the last \\boxed{{}} the reasoning wrote is the answer")
        run.answer(root, earlier)
    else:
        run.note(f"search-o1: {why}; no \\boxed{{}} answer anywhere")
        run.answer(root, "")
