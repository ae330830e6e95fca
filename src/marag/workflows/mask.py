"""``m-ask``: plan a knowledge state, refine it by search turns, answer from it.

The knowledge state is a list of (sub-question, sub-answer) pairs. It lives in the Node tree:
the root holds the question and the final answer, and each pair is a child node of kind
``"knowledge"`` whose question/answer hold the pair (an ``Update ti`` overwrites child i in
place, an ``Add`` appends a child). The tree therefore shows the final state; how it evolved is
in the steps (each update step's parsed op/index, with the query and evidence of its turn).

Turns are numbered from 1 in ``Step.turn`` (the plan is turn 0; ``Step.round`` is turn + 1 and
``cost.rounds`` counts the plan and every turn begun, including the one that ended). A turn is: ``mask.search``
(``<end>`` stops; an output with neither a query nor ``<end>`` also stops, recorded invalid),
top-``method.top_k`` retrieval, ``mask.summary``, ``mask.update`` (an invalid update is treated
as an add). The search agent sees every earlier turn's query with the summary it gave. With
``method.answer_every_turn`` (training) ``mask.answer`` runs after every turn's update; the
final answer is then the last of those when the state has not changed since, otherwise
``mask.answer`` runs once more on the final state (recorded with the number of the last turn
begun).
"""

from __future__ import annotations

from typing import Any

from marag.types import Node
from marag.workflows.engine import Run

KNOWLEDGE = "knowledge"


def state_of(run: Run, root: Node) -> list[list[str]]:
    nodes = run.trace.nodes
    return [[nodes[c].question, nodes[c].answer or ""] for c in root.children]


def apply_update(run: Run, root: Node, op: Any, query: str, evidence: str) -> str:
    """Apply an update decision to the state; returns what was done ("update t2" / "add t3")."""
    nodes = run.trace.nodes
    n = len(root.children)
    if isinstance(op, dict) and op.get("op") == "update":
        i = op.get("index")
        if isinstance(i, int) and 1 <= i <= n:
            node = nodes[root.children[i - 1]]
            node.question, node.answer = query, evidence
            return f"update t{i}"
    child = run.add_node(query, parent=root, kind=KNOWLEDGE)
    child.answer, child.solved = evidence, True
    return f"add t{n + 1}"


async def mask(run: Run) -> None:
    """M-ASK inference: plan -> up to ``method.max_turns`` (search, summary, update) -> answer."""
    cfg = run.config.method
    root = run.add_node(run.trace.question)
    root.workflow = ["plan"]
    run.round = 1
    plan, _ = await run.call("mask.plan", root.id, question=root.question, turn=0)
    value = plan.value if isinstance(plan.value, dict) else {}
    for pair in value.get("pairs") or []:
        if isinstance(pair, (list, tuple)) and len(pair) == 2:
            child = run.add_node(str(pair[0]), parent=root, kind=KNOWLEDGE)
            child.answer, child.solved = str(pair[1]), True
    answer = value.get("answer")
    answered = False  # whether a mask.answer step has answered the current state
    history: list[list[str]] = []  # (query, summary) per searching turn, as App. C.2 shows it
    for turn in range(1, cfg.max_turns + 1):
        run.round = turn + 1
        state = state_of(run, root)
        # A repeated query still runs (the model asked for it) but the step is marked invalid.
        s, _ = await run.call("mask.search", root.id, question=root.question, state=state,
                              history=list(history), turn=turn)
        sv = s.value if isinstance(s.value, dict) else {}
        query = sv.get("query")
        if sv.get("end") or not isinstance(query, str) or not query.strip():
            if not s.valid:
                run.note(f"turn {turn}: search gave neither a query nor <end> ({s.reason}); "
                         "stopping")
            break
        query = query.strip()
        root.workflow.append("search")
        hits = await run.retrieve([query], cfg.top_k, root.id, turn=turn)
        summ, _ = await run.call("mask.summary", root.id, question=root.question, query=query,
                                 docs=hits[0].passages, turn=turn)
        evidence = summ.value if isinstance(summ.value, str) else ""
        history.append([query, evidence])
        upd, _ = await run.call("mask.update", root.id, question=root.question, state=state,
                                query=query, evidence=evidence, turn=turn)
        did = apply_update(run, root, upd.value if upd.valid else None, query, evidence)
        if not upd.valid:
            run.note(f"turn {turn}: invalid update ({upd.reason}); treated as {did}")
        answered = False
        if cfg.answer_every_turn:
            a, _ = await run.call("mask.answer", root.id, question=root.question,
                                  state=state_of(run, root), turn=turn)
            answer, answered = a.value, True
    if not answered:
        last_turn = run.round - 1
        a, _ = await run.call("mask.answer", root.id, question=root.question,
                              state=state_of(run, root), turn=last_turn)
        answer = a.value
    run.answer(root, answer)
