"""A seed paper's main table, and marag's measurement of it beside the published numbers.

The published tables live in ``marag/report/papers/<paper>.yaml`` (rows, datasets, metrics,
the paper's setting, transcribed from the papers). :func:`plan_rows` says, for each row, which
marag method (and which trained adapter) runs it, or in one line why it cannot run here;
:func:`render` writes the Markdown and CSV with the published number beside marag's in every
cell, n per cell, cost columns and a comparability card. Running the rows is
``marag table`` (``marag.commands.table``).
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

PAPERS_DIR = Path(__file__).resolve().parent / "papers"

# row method -> (marag method, the kind of trained adapter it needs, or None for untrained)
RUNNABLE: dict[str, tuple[str, str | None]] = {
    "llm-only": ("llm-only", None),
    "vanilla": ("vanilla", None),
    "vanilla-sft": ("vanilla", "reader"),
    "mmoa-rag": ("mmoa-rag", "mmoa-rag"),
    "rrr": ("rrr", "rrr"),
    "bgm": ("bgm", "bgm"),
    "retrobust": ("vanilla", "retrobust"),
    "adaptive-rag": ("adaptive-rag", "adaptive-rag"),
    "ircot": ("ircot", None),
    "mao-arag-untrained": ("mao-arag", None),
    "mao-arag": ("mao-arag", "mao-arag"),
    "jade-untrained": ("jade", None),
    "jade": ("jade", "jade"),
    "m-ask": ("m-ask", "m-ask"),
    "search-r1": ("search-r1", "search-r1"),
    "search-o1": ("search-o1", None),  # prompting only, as the papers ran it
    # untrained: M-ASK's DeepNote row had its note roles DPO-trained (docs/fidelity.md)
    "deepnote": ("deepnote", None),
    # the released checkpoints only (MODEL_CHECKS), behind an openai endpoint
    "self-rag": ("self-rag", None),
}
# rows marag does not run yet, each with its one-line reason
NOT_BUILT: dict[str, str] = {}
# the config a row needs beyond its method (Self-RAG: the reflection tokens' probabilities,
# and the tokens kept in the text by a vLLM server)
ROW_OVERRIDES: dict[str, tuple[str, ...]] = {
    "self-rag": ("llms.default.top_logprobs=20",
                 "llms.default.extra_body={skip_special_tokens: false}"),
}


def self_rag_problem(model: str, backend: str | None) -> str:
    """Why the Self-RAG row cannot run on ``model`` (served by ``backend``); "" when it can:
    its reflection tokens exist only in the released checkpoints, served behind an
    OpenAI-compatible endpoint (docs/fidelity.md#self-rag)."""
    from marag.roles.self_rag import is_checkpoint

    how = ("serve selfrag/selfrag_llama2_7b (vLLM, configs/self-rag.yaml) and pass --llm URL "
           "--model selfrag/selfrag_llama2_7b")
    if not is_checkpoint(model):
        return (f"Self-RAG needs its released checkpoints (reflection tokens); {model} is not "
                f"one: {how}")
    if backend is not None and backend != "openai":
        return f"Self-RAG runs its checkpoint behind an openai endpoint, not the {backend} " \
               f"backend: {how}"
    return ""


# rows whose adapter was trained for one role alone: it serves that role only
# (marag.llm.trained.with_role_adapter), whether the row's adapter is a registered name (whose
# TrainedAdapter.role agrees) or a folder. Adaptive-RAG's classifier is a model of its own in
# the paper (T5-large), and its strategies (no retrieval, single-step, IRCoT) are the untrained
# LLM's; RRR's rewriter and BGM's bridge are trained beside a generator from the SFT (MMOA-RAG
# S5.1.3); MAO-ARAG trains its planner alone, its executors fixed.
ADAPTER_ROLES: dict[str, str] = {"adaptive-rag": "adaptive.classify", "rrr": "mmoa.QR",
                                 "bgm": "DS", "mao-arag": "planner"}


def with_row_adapter(config: Any, row_method: str, adapter: str) -> Any:
    """``config`` with a trained row's ``adapter``: on the default LLM, or, for a row in
    ``ADAPTER_ROLES``, serving the trained role alone (``with_role_adapter``)."""
    from marag.config import Config, ConfigError
    from marag.llm.trained import TRAINED, with_role_adapter

    role = ADAPTER_ROLES.get(row_method)
    spec = TRAINED.get(adapter)
    if spec is not None and spec.role is not None and spec.role != role:
        raise ConfigError(f"the {row_method} row was given {adapter}, trained for "
                          f"{spec.method}'s {spec.role} role alone")
    if role is None:
        raw = config.model_dump()
        raw["llms"]["default"]["adapter"] = [adapter]
        return Config.model_validate(raw)
    return with_role_adapter(config, role, adapter, label=f"the {row_method} row")


# rows that run only on some models: row method -> (model, backend) -> why not ("" if it can)
MODEL_CHECKS = {"self-rag": self_rag_problem}
# the trained adapters marag's own runs committed, per model and kind (marag.llm.trained)
ADAPTERS: dict[str, dict[str, str]] = {
    "qwen2.5-coder-0.5b": {"jade": "qwen-jade", "mmoa-rag": "qwen-mmoa",
                           "reader": "qwen-jade-reader", "search-r1": "qwen-search-r1",
                           "adaptive-rag": "qwen-adaptive",
                           "retrobust": "qwen-retrobust", "rrr": "qwen-rrr", "bgm": "qwen-bgm",
                           "mao-arag": "qwen-mao-arag"},
}
# the file names a dataset column goes by in a data folder (FlashRAG's and ../shared/data's)
DATASET_FILES: dict[str, tuple[str, ...]] = {
    "nq": ("nq_open", "nq"), "popqa": ("popqa",), "ambigqa": ("ambigqa", "ambig_qa"),
    "hotpotqa": ("hotpotqa",), "2wikimultihopqa": ("2wikimultihopqa", "2wiki"),
    "musique": ("musique",), "bamboogle": ("bamboogle",), "triviaqa": ("triviaqa",),
}


@dataclass(frozen=True)
class PaperRow:
    label: str
    method: str | None
    group: str | None
    values: dict[str, dict[str, float]]  # dataset -> metric -> published number


@dataclass(frozen=True)
class PaperTable:
    paper: str
    title: str
    table: str
    setting: dict[str, Any]
    datasets: list[str]
    rows: list[PaperRow]

    @property
    def metrics(self) -> list[str]:
        return list(self.setting.get("metrics") or ["f1"])

    @property
    def question_sets(self) -> list[str]:
        """The dataset columns (the printed averages, ``avg*``, are not datasets)."""
        return [d for d in self.datasets if not d.startswith("avg")]


def known_papers() -> list[str]:
    return sorted(p.stem for p in PAPERS_DIR.glob("*.yaml"))


def load_paper(name: str) -> PaperTable:
    """The published main table of seed paper ``name`` (jade, mao-arag, mmoa-rag, m-ask)."""
    path = PAPERS_DIR / f"{name}.yaml"
    if not path.is_file():
        raise ValueError(f"no main table for paper {name!r}; known: {', '.join(known_papers())}")
    raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    rows = [PaperRow(r["label"], r.get("method"), r.get("group"),
                     {d: {m: float(v) for m, v in (ms or {}).items()}
                      for d, ms in (r.get("values") or {}).items()})
            for r in raw["rows"]]
    return PaperTable(raw["paper"], raw.get("title", ""), raw.get("table", ""),
                      dict(raw.get("setting") or {}), list(raw["datasets"]), rows)


@dataclass
class RowPlan:
    row: PaperRow
    method: str | None  # marag's method; None: the row does not run
    adapter: str | None = None
    reason: str = ""  # why it does not run, or what it runs instead
    overrides: tuple[str, ...] = ()  # config the row needs beyond its method (ROW_OVERRIDES)


def plan_rows(table: PaperTable, model: str, adapters: Mapping[str, str] | None = None,
              backend: str | None = None) -> list[RowPlan]:
    """Which marag method runs each row on ``model`` (served by ``backend``, when known).
    ``adapters`` (row method -> folder or registered name) give trained rows their weights;
    otherwise marag's own committed adapters for ``model`` are used where there is one. A row
    that runs only on some models (``MODEL_CHECKS``: Self-RAG's checkpoints) says why not on
    any other, rather than run there."""
    given = dict(adapters or {})
    own = ADAPTERS.get(model, {})
    out = []
    for row in table.rows:
        key = row.method
        if key is None:
            out.append(RowPlan(row, None, reason="no marag method corresponds to this row"))
            continue
        if key in NOT_BUILT:
            out.append(RowPlan(row, None, reason=NOT_BUILT[key]))
            continue
        if key not in RUNNABLE:
            out.append(RowPlan(row, None, reason=f"unknown row method {key!r}"))
            continue
        method, kind = RUNNABLE[key]
        problem = MODEL_CHECKS[key](model, backend) if key in MODEL_CHECKS else ""
        if problem:
            out.append(RowPlan(row, None, reason=problem))
            continue
        if kind is None:
            out.append(RowPlan(row, method, overrides=ROW_OVERRIDES.get(key, ())))
            continue
        adapter = given.get(key) or own.get(kind)
        if adapter is None:
            out.append(RowPlan(row, None, reason=f"no trained {kind} adapter for {model} "
                               f"(train one, then --adapter {key}=DIR)"))
            continue
        out.append(RowPlan(row, method, adapter))
    return out


def stray_adapters(table: PaperTable, adapters: Mapping[str, str],
                   rows: set[str] | None = None) -> str:
    """Why some ``--adapter ROW=...`` would be ignored ('' when none would): each must name a
    row of ``table`` that runs with a trained adapter, and one of ``rows`` where only those
    run (``--rows``), or the user's weights silently go unused (an untrained row such as
    ``vanilla`` runs the base model whatever is passed)."""
    takes = [r.method for r in table.rows
             if r.method in RUNNABLE and RUNNABLE[r.method][1] is not None]
    stray = [k for k in adapters if k not in takes]
    if stray:
        return (f"--adapter {', '.join(stray)}: no row of {table.paper} by that name takes an "
                f"adapter; the rows that do: {', '.join(takes) or 'none'}")
    idle = [k for k in adapters if rows is not None and k not in rows]
    if idle:
        return f"--adapter {', '.join(idle)}: not among the rows asked for (--rows)"
    return ""


def find_dataset(data_dir: Path, column: str) -> Path | None:
    """The questions file of a table column in ``data_dir`` (``<name>.questions.jsonl`` as
    in ../shared/data, or ``<name>.jsonl``/``<name>/test.jsonl``/``<name>/dev.jsonl``)."""
    for name in DATASET_FILES.get(column, (column,)):
        for rel in (f"{name}.questions.jsonl", f"{name}.jsonl", f"{name}/test.jsonl",
                    f"{name}/dev.jsonl"):
            p = data_dir / rel
            if p.is_file():
                return p
    return None


@dataclass
class Cell:
    n: int
    scores: dict[str, float]  # metric -> mean (0..1)
    cost: dict[str, float] = field(default_factory=dict)  # per question
    error: str = ""


def _pct(x: float | None) -> str:
    return "—" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.1f}"


def cell_text(cell: Cell | None, published: Mapping[str, float], metrics: Sequence[str]
              ) -> str:
    """``F1 23.4 (paper 45.6) · EM ... · n=20``; published alone when marag has no cell."""
    parts = []
    for m in metrics:
        ours = None if cell is None or cell.error else 100 * cell.scores.get(m, math.nan)
        parts.append(f"{m.upper()} {_pct(ours)} ({_pct(published.get(m))})")
    tail = "" if cell is None else (f" · failed: {cell.error}" if cell.error
                                   else f" · n={cell.n}")
    return " · ".join(parts) + tail


def row_cost(cells: Mapping[str, Cell]) -> dict[str, float]:
    """Per-question cost of a row, weighted by each dataset's n."""
    total = sum(c.n for c in cells.values() if not c.error)
    if not total:
        return {}
    keys = ("llm_calls", "total_tokens", "retrieval_calls", "seconds")
    return {k: sum(c.cost.get(k, 0.0) * c.n for c in cells.values() if not c.error) / total
            for k in keys}


def render(table: PaperTable, plans: Sequence[RowPlan], cells: Mapping[tuple[str, str], Cell],
           datasets: Sequence[str], card: Mapping[str, Any]) -> tuple[str, str]:
    """(Markdown, CSV) of the table: every row of the paper, the datasets marag ran, marag's
    number with the published one beside it in each cell."""
    metrics = table.metrics
    md = io.StringIO()
    md.write(f"# {table.paper}: {table.table} beside marag\n\n")
    md.write(f"{table.title}\n\n")
    md.write("Each cell: marag's score (the paper's in parentheses), percent, and n. "
             "The numbers are not comparable unless the card's settings match the paper's.\n\n")
    md.write("## Comparability card\n\n| | paper | marag |\n|---|---|---|\n")
    s = table.setting
    for key, ours in card.items():
        theirs = s.get(key)
        if isinstance(theirs, list):
            theirs = ", ".join(map(str, theirs))
        md.write(f"| {key} | {'—' if theirs is None else theirs} | {ours} |\n")
    md.write("\n## Table\n\n")
    head = ["row", "marag method", *datasets, "calls/q", "tokens/q", "retrievals/q", "s/q"]
    md.write("| " + " | ".join(head) + " |\n|" + "---|" * len(head) + "\n")
    out = io.StringIO()
    w = csv.writer(out)
    w.writerow(["row", "method", "adapter", "dataset", "metric", "marag", "paper", "n",
                "llm_calls", "total_tokens", "retrieval_calls", "seconds", "note"])
    for plan in plans:
        row = plan.row
        if plan.method is None:
            md.write(f"| {row.label} | *not run: {plan.reason}* | " + " | ".join(
                cell_text(None, row.values.get(d, {}), metrics) for d in datasets)
                + " | — | — | — | — |\n")
            for d in datasets:
                for m in metrics:
                    w.writerow([row.label, "", "", d, m, "", row.values.get(d, {}).get(m, ""),
                                "", "", "", "", "", plan.reason])
            continue
        mine = {d: cells[(row.label, d)] for d in datasets if (row.label, d) in cells}
        cost = row_cost(mine)
        who = plan.method + (f" + {plan.adapter}" if plan.adapter else "")
        md.write(f"| {row.label} | {who} | " + " | ".join(
            cell_text(mine.get(d), row.values.get(d, {}), metrics) for d in datasets)
            + " | " + " | ".join(f"{cost[k]:.1f}" if k in cost else "—" for k in
                                 ("llm_calls", "total_tokens", "retrieval_calls", "seconds"))
            + " |\n")
        for d in datasets:
            c = mine.get(d)
            for m in metrics:
                ours = "" if c is None or c.error else round(100 * c.scores.get(m, math.nan), 2)
                w.writerow([row.label, plan.method, plan.adapter or "", d, m, ours,
                            row.values.get(d, {}).get(m, ""), "" if c is None else c.n,
                            *("" if c is None else round(c.cost.get(k, 0.0), 3) for k in
                              ("llm_calls", "total_tokens", "retrieval_calls", "seconds")),
                            "" if c is None else c.error])
    missing = [d for d in table.question_sets if d not in datasets]
    if missing:
        md.write(f"\nNot run (no questions file found): {', '.join(missing)}.\n")
    if table.setting.get("notes"):
        md.write(f"\nPaper's setting, notes: {table.setting['notes']}\n")
    return md.getvalue(), out.getvalue()


def plot_cost(plans: Sequence[RowPlan], cells: Mapping[tuple[str, str], Cell],
              datasets: Sequence[str], path: Path) -> Path | None:
    """F1 against tokens per question, one point per row that ran (mean over datasets,
    weighted by n)."""
    points = []
    for plan in plans:
        if plan.method is None:
            continue
        mine = {d: cells[(plan.row.label, d)] for d in datasets
                if (plan.row.label, d) in cells and not cells[(plan.row.label, d)].error}
        n = sum(c.n for c in mine.values())
        if not n:
            continue
        f1 = sum(100 * c.scores.get("f1", 0.0) * c.n for c in mine.values()) / n
        points.append((plan.row.label, row_cost(mine).get("total_tokens", 0.0), f1))
    if not points:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for label, x, y in points:
        ax.scatter([x], [y])
        ax.annotate(label, (x, y), fontsize="small", xytext=(3, 3), textcoords="offset points")
    ax.set_xlabel("tokens per question")
    ax.set_ylabel("F1 (mean over datasets, by n)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
