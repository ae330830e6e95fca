"""One line of text for what a step produced, by role (the CLI and the web page share it)."""

from __future__ import annotations

from marag.types import Step


def _short(text: str, width: int) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= width else text[: width - 1] + "…"


def step_summary(step: Step) -> str:
    """The parsed value in words: a plan, sub-questions, kept documents, an answer, a query."""
    v = step.parsed
    if step.role == "R":
        return f"{step.raw} → {len(step.doc_ids)} docs"
    if step.role == "planner" and isinstance(v, list):
        return ", ".join(map(str, v)) or "(no plan)"
    if step.role in ("QDS", "QDP", "mmoa.QR") and isinstance(v, list):
        return " | ".join(f"{i}. {q}" for i, q in enumerate(v, 1)) or "(none)"
    if step.role == "DS" and isinstance(v, list):
        return "keep " + (", ".join(f"Document{i}" for i in v) or "none")
    if step.role == "mask.plan" and isinstance(v, dict):
        pairs = "; ".join(f"{q} → {a}" for q, a in (v.get("pairs") or []))
        return f"{pairs} ⇒ {v.get('answer', '')}"
    if step.role == "mask.search" and isinstance(v, dict):
        return "<end>" if v.get("end") else f"search: {v.get('query', '')}"
    if step.role == "search-r1" and isinstance(v, dict):
        action = v.get("action")
        return f"{action}: {v.get('content', '')}" if action else "(no action)"
    if step.role == "mask.update" and isinstance(v, dict):
        return f"{v.get('op', '?')} t{v.get('index', '?')}"
    return str(v) if v not in (None, "") else "(empty)"
