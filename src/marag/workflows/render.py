"""Plain-text rendering of a Trace as a tree: which agent did what on which node, with which
documents, how long it took and how many tokens it used. Used by ``marag ask``."""

from __future__ import annotations

from marag.types import Node, Step, Trace

_ANSI = {"bold": "\033[1m", "dim": "\033[2m", "red": "\033[31m", "green": "\033[32m",
         "cyan": "\033[36m", "reset": "\033[0m"}


class _Style:
    def __init__(self, color: bool) -> None:
        self.color = color

    def __call__(self, text: str, *styles: str) -> str:
        if not self.color or not styles:
            return text
        return "".join(_ANSI[s] for s in styles) + text + _ANSI["reset"]


def _short(text: str, width: int) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= width else text[: width - 1] + "…"


def _value(step: Step) -> str:
    v = step.parsed
    if step.role in ("planner",) and isinstance(v, list):
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
    if step.role == "mask.update" and isinstance(v, dict):
        return f"{v.get('op', '?')} t{v.get('index', '?')}"
    return str(v) if v not in (None, "") else "(empty)"


def _step_line(step: Step, style: _Style, width: int, show_turn: bool) -> list[str]:
    when = f"turn {step.turn}" if show_turn else f"round {step.round}"
    meta = f"{step.latency:6.2f}s"
    if step.role == "R":
        titles = (step.parsed or {}).get("titles", []) if isinstance(step.parsed, dict) else []
        docs = ", ".join(f"{i} “{_short(t, 40)}”" for i, t in zip(step.doc_ids, titles))
        head = f"{when:8} {'R':13} {_short(step.raw, width)!r} → {len(step.doc_ids)} docs"
        return [head + "  " + style(meta, "dim"), style(f"{'':22}{docs}", "dim")]
    meta += f"  {step.prompt_tokens}+{step.completion_tokens} tok"
    line = f"{when:8} {step.role:13} {_short(_value(step), width)}"
    out = [line + "  " + style(meta, "dim")]
    if not step.valid:
        out.append(style(f"{'':22}✗ invalid output: {step.reason}", "red"))
    return out


def render_trace(trace: Trace, *, color: bool = False, width: int = 90) -> str:
    """The answer, a one-line cost summary, then the node tree with each node's steps."""
    s = _Style(color)
    c = trace.cost
    lines = [f"{s('Q:', 'bold')} {trace.question}",
             f"{s('A:', 'bold')} {s(trace.answer if trace.answer is not None else '(none)', 'bold', 'green')}",
             ""]
    status = s(trace.status, "red" if trace.status == "failed" else "cyan")
    summary = (f"{trace.method} · {status} · {c.llm_calls} LLM calls · {c.retrieval_calls} "
               f"retrievals · {c.rounds} rounds · {c.prompt_tokens}+{c.completion_tokens} tokens · "
               f"{c.seconds:.2f}s")
    if c.money:
        summary += f" · ${c.money:.6f}"
    lines.append(summary)
    if trace.metrics:
        lines.append("metrics: " + " ".join(f"{k}={v:.3f}" for k, v in trace.metrics.items()))
    show_turn = trace.method == "m-ask"
    by_node: dict[int, list[tuple[int, Step]]] = {}
    for i, st in enumerate(trace.steps):
        by_node.setdefault(st.node_id, []).append((i, st))
    nodes = {n.id: n for n in trace.nodes}

    def first_step(node: Node) -> int:
        own = [i for i, _ in by_node.get(node.id, [])[:1]]
        kids = [first_step(nodes[c]) for c in node.children if c in nodes]
        return min(own + kids, default=len(trace.steps))

    def walk(node: Node, indent: str) -> None:
        wf = f"  [{', '.join(node.workflow)}]" if node.workflow else ""
        kind = "" if node.kind == "root" else f" ({node.kind})"
        ans = s(node.answer, "green") if node.answer is not None else s("unsolved", "red")
        lines.append(f"{indent}{s(f'#{node.id}', 'bold')}{kind} {_short(node.question, width)} → {ans}{wf}")
        kids = [nodes[c] for c in node.children if c in nodes]
        # a node's steps that ran after its children (AS, a budget answer) print after them
        split = min((first_step(k) for k in kids), default=len(trace.steps))
        steps = by_node.get(node.id, [])
        for i, st in steps:
            if i < split:
                lines.extend(indent + "    " + x for x in _step_line(st, s, width, show_turn))
        for k in kids:
            walk(k, indent + "  ")
        for i, st in steps:
            if i >= split:
                lines.extend(indent + "    " + x for x in _step_line(st, s, width, show_turn))

    lines.append("")
    roots = [n for n in trace.nodes if n.parent is None]
    for r in roots:
        walk(r, "")
    if not roots:  # failed before any node existed
        for st in trace.steps:
            lines.extend("    " + x for x in _step_line(st, s, width, show_turn))
    for note in trace.notes:
        lines.append(s(f"note: {note}", "dim"))
    if trace.error:
        lines.append(s(f"error: {trace.error}", "red"))
    return "\n".join(lines)
