"""Plain-text rendering of a Trace as a tree: which agent did what on which node, with which
documents, how long it took and how many tokens it used. Used by ``marag ask``."""

from __future__ import annotations

from marag.types import Step, Trace
from marag.view.layout import NodeView, layout
from marag.view.summary import _short

_ANSI = {"bold": "\033[1m", "dim": "\033[2m", "red": "\033[31m", "green": "\033[32m",
         "cyan": "\033[36m", "reset": "\033[0m"}


class _Style:
    def __init__(self, color: bool) -> None:
        self.color = color

    def __call__(self, text: str, *styles: str) -> str:
        if not self.color or not styles:
            return text
        return "".join(_ANSI[s] for s in styles) + text + _ANSI["reset"]


def _step_line(step: Step, summary: str, style: _Style, width: int,
               show_turn: bool) -> list[str]:
    when = f"turn {step.turn}" if show_turn else f"round {step.round}"
    meta = f"{step.latency:6.2f}s"
    if step.role == "R":
        titles = (step.parsed or {}).get("titles", []) if isinstance(step.parsed, dict) else []
        docs = ", ".join(f"{i} “{_short(t, 40)}”" for i, t in zip(step.doc_ids, titles))
        head = f"{when:8} {'R':13} {_short(step.raw, width)!r} → {len(step.doc_ids)} docs"
        return [head + "  " + style(meta, "dim"), style(f"{'':22}{docs}", "dim")]
    meta += f"  {step.prompt_tokens}+{step.completion_tokens} tok"
    line = f"{when:8} {step.role:13} {_short(summary, width)}"
    out = [line + "  " + style(meta, "dim")]
    if not step.valid:
        out.append(style(f"{'':22}✗ invalid output: {step.reason}", "red"))
    return out


def render_trace(trace: Trace, *, color: bool = False, width: int = 90) -> str:
    """The answer, a one-line cost summary, then the node tree with each node's steps."""
    s = _Style(color)
    c = trace.cost
    answer = trace.answer if trace.answer is not None else "(none)"
    lines = [f"{s('Q:', 'bold')} {trace.question}",
             f"{s('A:', 'bold')} {s(answer, 'bold', 'green')}", ""]
    status = s(trace.status, "red" if trace.status == "failed" else "cyan")
    summary = (f"{trace.method} · {status} · {c.llm_calls} LLM calls · {c.retrieval_calls} "
               f"retrievals · {c.rounds} rounds · {c.prompt_tokens}+{c.completion_tokens} tokens · "
               f"{c.seconds:.2f}s")
    if c.money:
        summary += f" · ${c.money:.6f}"
    lines.append(summary)
    if trace.metrics:
        lines.append("metrics: " + " ".join(f"{k}={v:.3f}" for k, v in trace.metrics.items()))
    show_turn = trace.method in ("m-ask", "search-r1")
    lay = layout(trace.nodes, trace.steps)

    def steps(indices: list[int], indent: str) -> None:
        for i in indices:
            for x in _step_line(trace.steps[i], lay.summaries[i], s, width, show_turn):
                lines.append(indent + x)

    def walk(view: NodeView, indent: str) -> None:
        node = view.node
        wf = f"  [{', '.join(node.workflow)}]" if node.workflow else ""
        kind = "" if node.kind == "root" else f" ({node.kind})"
        ans = s(node.answer, "green") if node.answer is not None else s("unsolved", "red")
        lines.append(f"{indent}{s(f'#{node.id}', 'bold')}{kind} {_short(node.question, width)}"
                     f" → {ans}{wf}")
        steps(view.before, indent + "    ")
        for k in view.children:
            walk(k, indent + "  ")
        steps(view.after, indent + "    ")

    lines.append("")
    for r in lay.roots:
        walk(r, "")
    steps(lay.loose, "    ")
    for note in trace.notes:
        lines.append(s(f"note: {note}", "dim"))
    if trace.error:
        lines.append(s(f"error: {trace.error}", "red"))
    return "\n".join(lines)
