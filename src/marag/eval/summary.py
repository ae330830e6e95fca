"""Run metrics computed from traces alone: ``summarize(traces) -> dict``.

Everything in ``metrics.json`` comes from here, so a run directory's numbers can always be
recomputed from its ``traces.jsonl``. Answers are re-scored from the trace's answer and
golden answers rather than trusting ``trace.metrics``, which keeps old runs comparable after
a metric fix.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from typing import Any

from marag.metrics import ANSWER_METRICS, Scorer, score_trace
from marag.types import Trace

COST_FIELDS = (
    "llm_calls",
    "prompt_tokens",
    "completion_tokens",
    "total_tokens",
    "retrieval_calls",
    "rounds",
    "seconds",
    "money",
)
NO_WORKFLOW = "(none)"
PLANNER = "planner"
FALLBACK = " (fallback)"


def workflow_type(trace: Trace) -> str:
    """The workflow a trace ran, as a short label for distribution counts.

    Planner methods record the root's plan on node 0 (``"R,AG"``, ``"QDS"``...), marked
    ``" (fallback)"`` when the root's planner output was invalid. Static
    methods have no plan, so their label is the ordered set of roles their steps used,
    which is the method's fixed pipeline (``"QR,R,DS,AG"`` for mmoa-rag).
    """
    if trace.nodes and trace.nodes[0].workflow:
        label = ",".join(trace.nodes[0].workflow)
        root_plan = next((s for s in trace.steps if s.role == PLANNER and s.node_id == 0), None)
        # An unparseable plan leaves the configured fallback on the root; counting it as if
        # the planner had chosen it would misstate what the planner does.
        return label + FALLBACK if root_plan is not None and not root_plan.valid else label
    seen: dict[str, None] = {}
    for step in trace.steps:
        seen.setdefault(step.role, None)
    return ",".join(seen) if seen else NO_WORKFLOW


def trace_cost(trace: Trace) -> dict[str, float]:
    c = trace.cost
    return {
        "llm_calls": float(c.llm_calls),
        "prompt_tokens": float(c.prompt_tokens),
        "completion_tokens": float(c.completion_tokens),
        "total_tokens": float(c.prompt_tokens + c.completion_tokens),
        "retrieval_calls": float(c.retrieval_calls),
        "rounds": float(c.rounds),
        "seconds": float(c.seconds),
        "money": float(c.money),
    }


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def _group(traces: list[Trace], scores: list[dict[str, float]]) -> dict[str, Any]:
    """Scores and cost means over one group of traces (all items, and successful items only)."""
    ok = [i for i, t in enumerate(traces) if t.status != "failed"]
    statuses = Counter(t.status for t in traces)
    costs = [trace_cost(t) for t in traces]
    return {
        "n": len(traces),
        "failed": statuses.get("failed", 0),
        "budget": statuses.get("budget", 0),
        **{m: _mean([s[m] for s in scores]) for m in ANSWER_METRICS},
        "ok": {
            "n": len(ok),
            **{m: _mean([scores[i][m] for i in ok]) for m in ANSWER_METRICS},
        },
        "cost": {f: _mean([c[f] for c in costs]) for f in COST_FIELDS},
    }


def role_validity(traces: Iterable[Trace]) -> dict[str, dict[str, float]]:
    """Per ``Step.role``: how many steps honoured the role's output format."""
    valid: Counter[str] = Counter()
    total: Counter[str] = Counter()
    for t in traces:
        for s in t.steps:
            total[s.role] += 1
            valid[s.role] += int(bool(s.valid))
    return {
        role: {"valid": valid[role], "total": total[role], "rate": valid[role] / total[role]}
        for role in sorted(total)
    }


def workflow_counts(traces: Iterable[Trace]) -> dict[str, int]:
    counts = Counter(workflow_type(t) for t in traces)
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def summarize(traces: Iterable[Trace], scorer: Scorer | None = None) -> dict[str, Any]:
    """Aggregate a run's traces into the ``metrics.json`` structure.

    Keys: ``n``, ``failed``, ``budget``, ``em``/``f1``/``acc`` (failed items count as zero),
    ``ok`` (the same scores over items whose status is not ``failed``), ``cost`` (means per
    question of ``COST_FIELDS``), ``status`` counts, ``methods`` counts, ``roles`` (per-role
    format validity), ``workflows`` (workflow-type counts) and ``datasets`` (the group fields
    plus ``roles`` and ``workflows`` per dataset name).
    """
    traces = list(traces)
    scores = [score_trace(t, scorer) for t in traces]
    out = _group(traces, scores)
    out["status"] = dict(sorted(Counter(t.status for t in traces).items()))
    out["methods"] = dict(sorted(Counter(t.method for t in traces).items()))
    out["roles"] = role_validity(traces)
    out["workflows"] = workflow_counts(traces)

    by_ds: dict[str, list[int]] = defaultdict(list)
    for i, t in enumerate(traces):
        by_ds[t.dataset or "unknown"].append(i)
    datasets = {}
    for name in sorted(by_ds):
        idx = by_ds[name]
        group = [traces[i] for i in idx]
        datasets[name] = {
            **_group(group, [scores[i] for i in idx]),
            "roles": role_validity(group),
            "workflows": workflow_counts(group),
        }
    out["datasets"] = datasets
    return out
