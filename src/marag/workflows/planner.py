"""``jade`` and ``mao-arag`` inference (JADE Algorithm 1): a planner builds a workflow per node.

The execution tree starts with the root question. Each round takes the first *ready* node:
a fresh node whose earlier serial siblings are solved, or a node whose children are all
solved. A fresh node gets a planner call; its workflow either solves it (an ordered subset of
``QR, R, DS, AG``) or decomposes it (``QDS``/``QDP``: children are appended and the round ends).
A node whose children are all solved is answered by ``AS`` in a round of its own (as in
MAO-ARAG's case studies, where the summary is a turn of its own). For ``mao-arag`` that round
starts with a planner call (MAO-ARAG Eq. 2 puts AS in the planner's action space; its Cases 3
and 4 show "Planner: AS"); the only valid plan there is ``AS``, and anything else is recorded
invalid (so MAO-ARAG's format penalty applies) and AS runs all the same, since nothing else
can answer a node whose sub-questions are solved. ``jade`` runs AS without asking the planner
(JADE's planner prompt, App. E.1, offers no AS).

Fresh parallel siblings are planned and solved concurrently in a single round, each with its
own planner call. A serial child is first rewritten by ``QR`` with the original question and
its solved earlier siblings' (sub-question, answer) pairs as context (JADE Eq. 3); a valid
rewrite becomes the node's question, so planner, retrieval and AG all see the self-contained
form. ``jade`` rewrites every serial child, the first one included (JADE's Case 1 rewrites
sub-task 1); ``mao-arag`` only those after the first (MAO-ARAG's Case 4 rewrites the second
sub-question from the first answer and shows no rewrite of the first). With
``method.serial_rewrite: guarded`` (an option for small models) the sub-question is kept and
the rewrite is only its search query, and only when it shares a content word with it.

Within a solving workflow each agent's output joins the context of the agents after it
(JADE Algorithm 1, lines 13 and 19): QR's rewrite is the retrieval query and is shown to DS
and AG beside the node's question; DS's selection is what AG reads.

``method.final_synthesis`` (JADE Algorithm 1 line 32 against its Case 2):

* ``"decomposed"`` (default, as both papers' case studies run): AS answers decomposed nodes
  only; an undecomposed root is answered by its own AG.
* ``"always"``: as Algorithm 1 writes it, the final answer always comes from AS; a root that
  AG answered is then passed to AS with its (question, answer) as the one solved pair. That
  call is recorded in the last round and adds no round (the synthesis is outside the loop).

``method.root_plan`` / ``method.sub_plan`` fix the plan at the root / at every sub-question
instead of asking the planner (no planner call there, nor at ``mao-arag``'s AS turn of a fixed
root decomposition; ``cost.turns``, which counts planner calls, is then 0 for a run whose
every plan is fixed). A fixed decomposition that yields no sub-questions falls back as a
planned one does. The config checks both plans when it loads (only ``jade`` and ``mao-arag``
read them). A run with ``root_plan: [QDS]`` and ``sub_plan: [R, AG]`` executes "decompose
serially, then retrieve and answer each part" on every question: the traces
``marag sft --plans`` needs to label a warm start with a decomposition plan.

Rules where the papers are silent:

* an invalid plan is recorded invalid and replaced by ``method.fallback`` (default ``R, AG``);
  so is a decomposition that yields no sub-questions, and a plan to decompose below
  ``method.max_depth`` (the planner is told decomposition is off there; if it decomposes
  anyway its parser marks the plan invalid);
* a QR output that is invalid or empty leaves the query unchanged; a DS output that is
  invalid keeps every retrieved document;
* ``cost.rounds`` counts loop iterations (planning rounds and AS rounds). When
  ``method.max_rounds`` is used up before the root is answered, the run ends with
  ``status="budget"`` and a best-effort answer: ``AS`` over every solved sub-question when
  there is one, else ``AG`` on the root question without documents. That final call is
  recorded in the last round and does not count as a round.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from marag.config import DECOMPOSE_CODES, ConfigError, is_solving
from marag.roles.prompt import content_words
from marag.types import Node
from marag.workflows.engine import Run, gather_branches

# The kind of the child nodes each decomposition code makes (QDS serial, QDP parallel).
DECOMPOSE = dict(zip(DECOMPOSE_CODES, ("serial", "parallel"), strict=True))

__all__ = ["guarded_query", "is_solving", "jade", "mao_arag", "next_ready", "run_solving",
           "solve"]


async def jade(run: Run) -> None:
    """JADE: AS answers a decomposed node without a planner call; every serial child is
    rewritten."""
    await solve(run, planner_summarises=False, rewrite_first_serial=True)


async def mao_arag(run: Run) -> None:
    """MAO-ARAG: the planner is asked at a node whose sub-questions are solved, and writes AS;
    serial children after the first are rewritten."""
    await solve(run, planner_summarises=True, rewrite_first_serial=False)


async def solve(run: Run, *, planner_summarises: bool = False,
                rewrite_first_serial: bool = True) -> None:
    """Plan-decompose-solve over the execution tree until the root is answered or a budget
    ends it. ``planner_summarises``: a node whose children are solved gets a planner call
    (MAO-ARAG's AS turn) before AS. ``rewrite_first_serial``: QR also rewrites the first
    child of a serial decomposition (it has no solved sibling to draw on)."""
    cfg = run.config.method
    if not is_solving(list(cfg.fallback)):
        raise ConfigError(f"method.fallback {cfg.fallback} is not a solving workflow "
                          "(an ordered subset of QR, R, DS, AG ending with AG)")
    nodes = run.trace.nodes
    root = run.add_node(run.trace.question)
    while not root.solved:
        batch = next_ready(nodes)
        if not batch:  # cannot happen while the root is unsolved; guard against a silent loop
            raise RuntimeError("planner workflow: no node is ready but the root is unsolved")
        if run.round >= cfg.max_rounds:
            await _budget_answer(run, root, f"max_rounds ({cfg.max_rounds}) reached")
            break
        run.round += 1
        if batch[0].children:
            await _summarise(run, batch[0], planner_summarises)
        elif len(batch) == 1:
            subs = await _plan_and_run(run, batch[0], rewrite_first_serial)
            _expand(run, batch[0], subs)
        else:
            jobs = [_job(n) for n in batch]
            results = await gather_branches(run, jobs)
            for n, subs in zip(batch, results):  # expand in sibling order: ids stay deterministic
                _expand(run, n, subs)
    if cfg.final_synthesis == "always" and run.trace.status != "budget" and not root.children:
        p, _ = await run.call("AS", root.id, question=root.question,
                              pairs=[(root.question, root.answer or "")])
        run.answer(root, p.value)


def next_ready(nodes: list[Node]) -> list[Node]:
    """The first ready node in tree order, or all fresh parallel siblings if it is parallel."""
    for n in nodes:
        if n.solved:
            continue
        if n.children:
            if all(nodes[c].solved for c in n.children):
                return [n]
            continue
        if n.kind == "serial" and n.parent is not None:
            sibs = nodes[n.parent].children
            if any(not nodes[s].solved for s in sibs[: sibs.index(n.id)]):
                continue
        if n.kind == "parallel" and n.parent is not None:
            return [nodes[s] for s in nodes[n.parent].children
                    if not nodes[s].solved and not nodes[s].children]
        return [n]
    return []


def _job(node: Node) -> Callable[[Run], Awaitable[tuple[str, list[str]] | None]]:
    async def job(branch: Run) -> tuple[str, list[str]] | None:
        return await _plan_and_run(branch, node)  # parallel: no serial rewrite

    return job


def _expand(run: Run, node: Node, subs: tuple[str, list[str]] | None) -> None:
    if subs is None:
        return
    kind, questions = subs
    for q in questions:
        run.add_node(q, parent=node, kind=kind)


async def _plan_and_run(run: Run, node: Node, rewrite_first_serial: bool = True
                        ) -> tuple[str, list[str]] | None:
    """Plan ``node`` and run the plan. Returns (kind, sub-questions) for a decomposition (the
    caller appends the children), None when the node was solved."""
    cfg = run.config.method
    if node.kind == "serial" and node.parent is not None:
        first = run.trace.nodes[node.parent].children[0] == node.id
        if rewrite_first_serial or not first:
            await _self_contain(run, node)
    fixed = _fixed_plan(run, node)
    if fixed is not None:  # no planner call here
        workflow = fixed
    else:
        allow = node.depth < cfg.max_depth
        plan, _ = await run.call("planner", node.id, question=node.question,
                                 allow_decompose=allow, constrained=_restrict_planner(run))
        workflow = list(plan.value) if plan.valid else list(cfg.fallback)
        if not plan.valid:
            run.note(f"node {node.id}: invalid plan ({plan.reason}); fallback "
                     f"{','.join(workflow)}")
    if len(workflow) == 1 and workflow[0] in DECOMPOSE:
        code = workflow[0]
        dec, _ = await run.call(code, node.id, question=node.question,
                                max_items=cfg.max_subquestions)
        subs = [s.strip() for s in (dec.value or []) if isinstance(s, str) and s.strip()]
        subs = subs[: cfg.max_subquestions]
        if subs:
            node.workflow = workflow
            node.query = None  # a guarded serial query serves a solving workflow only
            return DECOMPOSE[code], subs
        workflow = list(cfg.fallback)
        run.note(f"node {node.id}: {code} gave no sub-questions; fallback {','.join(workflow)}")
    if not is_solving(workflow):  # a parser that called an odd plan valid must not derail us
        run.note(f"node {node.id}: plan {workflow} is not runnable; fallback")
        workflow = list(cfg.fallback)
    node.workflow = workflow
    await run_solving(run, node, workflow)
    return None


def _fixed_plan(run: Run, node: Node) -> list[str] | None:
    """The plan ``method.root_plan`` / ``method.sub_plan`` fixes at ``node``, or None when the
    planner decides there."""
    cfg = run.config.method
    fixed = cfg.root_plan if node.parent is None else cfg.sub_plan
    return None if fixed is None else list(fixed)


async def _self_contain(run: Run, node: Node) -> None:
    """Rewrite a serial sub-question with its solved earlier siblings' answers.

    ``method.serial_rewrite: replace`` (JADE Eq. 3): a valid rewrite becomes the node's
    question. ``guarded``: the question is kept, and ``node.query`` (what its solving
    workflow retrieves with, shows DS and AG, and hands its own QR) is ``guarded_query``'s;
    a rewrite it refuses is recorded invalid. The planner and a decomposer still see the
    question; a decomposed node drops its query."""
    nodes = run.trace.nodes
    sibs = nodes[node.parent].children  # type: ignore[index]
    done = [(nodes[s].question, nodes[s].answer or "") for s in sibs[: sibs.index(node.id)]]
    p, step = await run.call("QR", node.id, question=node.question, context=done,
                             original=run.trace.question)
    rewrite = p.value.strip() if p.valid and isinstance(p.value, str) else ""
    if run.config.method.serial_rewrite == "replace":
        if rewrite:
            node.question = rewrite
        return
    node.query = guarded_query(node.question, rewrite, [a for _, a in done])
    if not rewrite:
        run.note(f"node {node.id}: no valid serial rewrite; the sub-question is the query")
    elif node.query != rewrite:
        # recorded invalid, so SFT does not learn the guess and training sees a bad reply
        step.valid, step.reason = False, "rewrite shares no content word with the sub-question"
        run.note(f"node {node.id}: serial rewrite {rewrite!r} not used as the query "
                 f"(shares no content word with the sub-question)")


def guarded_query(question: str, rewrite: str, answers: list[str]) -> str | None:
    """The search query for a serial sub-question under ``serial_rewrite: guarded``.

    ``rewrite`` when it shares a content word with ``question`` (a small model's "rewrite" is
    often a guess, an earlier answer, or its prompt's example, none of which asks the
    sub-question); otherwise the sub-question followed by the earlier answers it may refer
    to, or None (the sub-question itself) when there are none."""
    if rewrite and not content_words(rewrite).isdisjoint(content_words(question)):
        return rewrite
    known = [a.strip() for a in answers if a and a.strip()]
    return " ".join([question.strip(), *known]) if known else None


async def run_solving(run: Run, node: Node, workflow: list[str]) -> None:
    """Execute a solving workflow on ``node`` and write its answer."""
    k = run.config.method.top_k
    # QR's output: this round's context for R, DS and AG (a guarded serial rewrite's query
    # until the workflow's own QR replaces it)
    rewrite: str | None = node.query
    docs = None
    skip = run.config.method.skip_codes
    for code in workflow:
        if code in skip:
            run.note(f"node {node.id}: {code} skipped (method.skip_codes)")
            continue
        if code == "QR":  # a guarded serial query is rewritten, since it names earlier answers
            p, _ = await run.call("QR", node.id, question=node.query or node.question)
            if p.valid and isinstance(p.value, str) and p.value.strip():
                rewrite = p.value.strip()
        elif code == "R":
            docs = (await run.retrieve([rewrite or node.question], k, node.id))[0].passages
        elif code == "DS":
            if not docs:
                run.note(f"node {node.id}: DS skipped, nothing retrieved")
                continue
            p, _ = await run.call("DS", node.id, question=node.question, docs=docs,
                                  rewrite=rewrite)
            if p.valid and p.value:
                docs = [docs[i] for i in p.value]
        elif code == "AG":
            p, _ = await run.call("AG", node.id, question=node.question, docs=docs,
                                  rewrite=rewrite)
            run.answer(node, p.value)


async def _summarise(run: Run, node: Node, ask_planner: bool) -> None:
    nodes = run.trace.nodes
    pairs = [(nodes[c].question, nodes[c].answer or "") for c in node.children]
    # a fixed decomposition is the run's plan, not the planner's: its AS turn is not asked
    if ask_planner and _fixed_plan(run, node) is None:
        plan, _ = await run.call("planner", node.id, question=node.question, pairs=pairs,
                                 constrained=_restrict_planner(run))
        if not plan.valid:
            run.note(f"node {node.id}: planner wrote {plan.value} at its AS turn "
                     f"({plan.reason}); AS runs")
    p, _ = await run.call("AS", node.id, question=node.question, pairs=pairs)
    run.answer(node, p.value)


async def _budget_answer(run: Run, root: Node, why: str) -> None:
    run.trace.status = "budget"
    solved = [n for n in run.trace.nodes[1:] if n.solved]
    if solved:
        pairs = [(n.question, n.answer or "") for n in solved]
        p, _ = await run.call("AS", root.id, question=root.question, pairs=pairs)
        run.note(f"budget: {why}; root answered by AS from {len(solved)} solved sub-question(s)")
    else:
        p, _ = await run.call("AG", root.id, question=root.question, docs=None)
        run.note(f"budget: {why}; root answered by AG without documents")
    run.answer(root, p.value)


def _restrict_planner(run: Run) -> bool:
    return run.restricts("planner", "constrained_planner", "plan codes")
