"""Fixed pipelines: ``llm-only``, ``vanilla``, ``mmoa-rag`` and the two baselines MMOA-RAG
rebuilt on its pipeline, ``rrr`` (Rewrite-Retrieve-Read) and ``bgm`` (the bridge model).

Each runs in a single round on the root node; ``node.workflow`` names the codes it ran.
"""

from __future__ import annotations

from marag.roles.decompose import MAX_ITEMS as MMOA_MAX_SUBQUESTIONS
from marag.types import Node, Passage
from marag.workflows.engine import Run


async def llm_only(run: Run) -> None:
    """AG answers from the model's own knowledge, no documents."""
    root = run.add_node(run.trace.question)
    root.workflow = ["AG"]
    run.round = 1
    p, _ = await run.call("AG", root.id, question=root.question, docs=None)
    run.answer(root, p.value)


async def vanilla(run: Run) -> None:
    """Top-k retrieval on the raw question, then AG with those documents."""
    root = run.add_node(run.trace.question)
    root.workflow = ["R", "AG"]
    run.round = 1
    hits = await run.retrieve([root.question], run.config.method.top_k, root.id)
    p, _ = await run.call("AG", root.id, question=root.question, docs=hits[0].passages)
    run.answer(root, p.value)


def restrict_selector(run: Run) -> bool:
    """Whether DS decodes under MMOA-RAG's restricted vocabulary (Eq. 5) in this run."""
    return run.restricts("DS", "constrained_selector", "document ids (MMOA-RAG Eq. 5)")


def split_candidates(total: int, n: int) -> list[int]:
    """How many of ``total`` candidates each of ``n`` sub-questions contributes: as even as
    possible, earlier sub-questions first (10 over 3 -> [4, 3, 3], over 4 -> [3, 3, 2, 2]).

    MMOA-RAG (S5.1.3) gives only the even cases (2 sub-questions -> top-5 each); the split
    for 3 or 4 sub-questions is marag's own rule."""
    if n <= 0:
        return []
    base, extra = divmod(total, n)
    return [base + (1 if i < extra else 0) for i in range(n)]


def pool_candidates(ranked: list[list[Passage]], quotas: list[int]) -> list[Passage]:
    """Take each list's quota of passages not already taken, in order. A duplicate does not use
    up a quota: the next-ranked passage of that list takes its place.

    De-duplication with this back-fill is marag's own rule: MMOA-RAG says only that the
    selector always sees K candidates."""
    seen: set[str] = set()
    out: list[Passage] = []
    for passages, quota in zip(ranked, quotas):
        taken = 0
        for p in passages:
            if taken >= quota:
                break
            if p.id in seen:
                continue
            seen.add(p.id)
            out.append(p)
            taken += 1
    return out


async def mmoa(run: Run) -> None:
    """MMOA-RAG: QR writes sub-questions, each is retrieved, a fixed pool of
    ``method.candidates`` documents is split across them, DS selects, AG answers.

    Using only the first four of more sub-questions is marag's own rule (the paper penalises
    more than four in training, Eq. 3, but does not say what inference does with them)."""
    root = run.add_node(run.trace.question)
    root.workflow = ["QR", "R", "DS", "AG"]
    run.round = 1
    docs = await _rewrite_and_pool(run, root)
    docs = await _select(run, root, docs)
    p, _ = await run.call("AG", root.id, question=root.question, docs=docs)
    run.answer(root, p.value)


async def rrr(run: Run) -> None:
    """Rewrite-Retrieve-Read as MMOA-RAG rebuilt it (S5.1.3): MMOA-RAG's pipeline without the
    selector: QR writes the queries, the pool of ``method.candidates`` documents is split
    across them, AG reads them all."""
    root = run.add_node(run.trace.question)
    root.workflow = ["QR", "R", "AG"]
    run.round = 1
    docs = await _rewrite_and_pool(run, root)
    p, _ = await run.call("AG", root.id, question=root.question, docs=docs)
    run.answer(root, p.value)


async def bgm(run: Run) -> None:
    """BGM as MMOA-RAG rebuilt it (S5.1.3): the question retrieves ``method.candidates``
    documents, the bridge (DS) keeps the helpful ones, AG reads them."""
    root = run.add_node(run.trace.question)
    root.workflow = ["R", "DS", "AG"]
    run.round = 1
    hits = await run.retrieve([root.question], run.config.method.candidates, root.id)
    docs = await _select(run, root, list(hits[0].passages))
    p, _ = await run.call("AG", root.id, question=root.question, docs=docs)
    run.answer(root, p.value)


async def _rewrite_and_pool(run: Run, root: Node) -> list[Passage]:
    """mmoa.QR's queries (the question itself when it gives none; the first four of more),
    each retrieved, pooled to ``method.candidates`` documents."""
    cfg = run.config.method
    # mmoa.QR's parser flags more than MMOA_MAX_SUBQUESTIONS queries (the MMOA-RAG penalty)
    qr, _ = await run.call("mmoa.QR", root.id, question=root.question)
    subs = [s.strip() for s in (qr.value or []) if isinstance(s, str) and s.strip()]
    if not subs:
        subs = [root.question]
        run.note("mmoa.QR gave no sub-questions; retrieving with the question itself")
    if len(subs) > MMOA_MAX_SUBQUESTIONS:
        run.note(f"mmoa.QR gave {len(subs)} sub-questions; using the first "
                 f"{MMOA_MAX_SUBQUESTIONS}")
        subs = subs[:MMOA_MAX_SUBQUESTIONS]
    # Each query fetches the full pool size so that duplicates can be replaced from its list.
    hits = await run.retrieve(subs, cfg.candidates, root.id)
    return pool_candidates([h.passages for h in hits], split_candidates(cfg.candidates, len(subs)))


async def _select(run: Run, root: Node, docs: list[Passage]) -> list[Passage]:
    """DS's selection of ``docs`` (all of them when its output is invalid or empty)."""
    if not docs:
        run.note("retrieval returned no candidates; DS skipped")
        return docs
    ds, _ = await run.call("DS", root.id, question=root.question, docs=docs,
                           constrained=restrict_selector(run))
    if ds.valid and ds.value:
        return [docs[i] for i in ds.value]
    return docs
