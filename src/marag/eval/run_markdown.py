"""``report.md`` for one run: a readable page made from ``run.json`` and the summary."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

COST_LABELS = {
    "llm_calls": "LLM calls",
    "prompt_tokens": "prompt tok",
    "completion_tokens": "completion tok",
    "total_tokens": "total tok",
    "retrieval_calls": "retrievals",
    "rounds": "rounds",
    "seconds": "seconds",
    "money": "USD",
}


def fmt(value: Any, digits: int = 2) -> str:
    if isinstance(value, bool) or value is None:
        return "-" if value is None else str(value)
    if isinstance(value, float):
        if value and abs(value) < 10 ** -digits:
            return f"{value:.2e}"
        return f"{value:.{digits}f}"
    return str(value)


def md_table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A GitHub markdown table; numbers are right-aligned."""
    def align(col: int) -> str:
        nums = all(isinstance(r[col], (int, float)) and not isinstance(r[col], bool)
                   for r in rows if r[col] is not None)
        return "---:" if rows and nums else "---"

    lines = ["| " + " | ".join(header) + " |",
             "|" + "|".join(align(i) for i in range(len(header))) + "|"]
    for r in rows:
        lines.append("| " + " | ".join(fmt(v) for v in r) + " |")
    return "\n".join(lines)


def pct(x: float) -> float:
    return round(100.0 * x, 2)


def _llm_line(info: dict[str, Any]) -> str:
    line = f"{info.get('backend', '?')} {info.get('model', '?')}"
    local = [str(info[k]) for k in ("device", "dtype") if k in info]
    return f"{line} ({', '.join(local)})" if local else line


def run_markdown(manifest: dict[str, Any], summary: dict[str, Any]) -> str:
    ident = manifest.get("identity", {})
    dataset = manifest.get("dataset_name") or Path(str(ident.get("dataset", "?"))).name
    title = f"# {ident.get('method', '?')} on {dataset}"
    meta = [
        (f"- questions: {summary['n']} (failed {summary['failed']}, budget-limited "
         f"{summary['budget']})"),
        f"- limit {ident.get('limit')}, seed {ident.get('seed')}",
        (f"- created {manifest.get('created', '?')}; resumed "
         f"{len(manifest.get('resumes', []))} time(s)"),
    ]
    if manifest.get("command"):
        meta.append(f"- command: `{' '.join(manifest['command'])}`")
    if manifest.get("llms"):
        meta.append("- models: " + "; ".join(
            f"{name}: {_llm_line(info)}" for name, info in manifest["llms"].items()))
    if manifest.get("role_prompts"):
        profiles = ", ".join(f"{b}: {p}" for b, p in manifest.get("model_profiles", {}).items())
        meta.append("- prompt variants: " + ", ".join(
            f"{r}={v}" for r, v in manifest["role_prompts"].items())
            + (f" (model profiles: {profiles})" if profiles else ""))
    if manifest.get("versions"):
        meta.append("- versions: " + ", ".join(f"{k} {v}" for k, v in manifest["versions"].items()))

    scores = [[name, d["n"], d["failed"], pct(d["em"]), pct(d["f1"]), pct(d["acc"]),
               pct(d["ok"]["f1"])] for name, d in summary["datasets"].items()]
    scores.append(["**all**", summary["n"], summary["failed"], pct(summary["em"]),
                   pct(summary["f1"]), pct(summary["acc"]), pct(summary["ok"]["f1"])])
    score_table = md_table(["dataset", "n", "failed", "EM", "F1", "Acc", "F1 (ok only)"], scores)

    fields = list(COST_LABELS)
    cost_rows = [[name, *[d["cost"][f] for f in fields]] for name, d in summary["datasets"].items()]
    cost_rows.append(["**all**", *[summary["cost"][f] for f in fields]])
    cost_table = md_table(["dataset", *COST_LABELS.values()], cost_rows)

    role_table = md_table(["role", "valid", "total", "valid %"],
                          [[r, v["valid"], v["total"], pct(v["rate"])]
                           for r, v in summary["roles"].items()])
    n = max(summary["n"], 1)
    wf_table = md_table(["workflow", "count", "share %"],
                        [[w, c, pct(c / n)] for w, c in summary["workflows"].items()])
    parts = [title, "\n".join(meta),
             "## Answers (EM/F1/Acc in %; failed items score 0)", score_table,
             "## Cost (mean per question)", cost_table,
             "## Format validity per role", role_table,
             "## Workflow types", wf_table]
    return "\n\n".join(parts) + "\n"
