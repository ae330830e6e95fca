"""``marag table <paper>``: every row of a seed paper's main table that marag runs, on the
datasets present, beside the published numbers (``marag.report.paper_table``)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

HELP = ("run every row of a seed paper's main table that marag has, on the datasets present, "
        "and write table.md / table.csv with the published numbers beside marag's")


def register(sub: Any) -> None:
    from marag.report.paper_table import known_papers

    p = sub.add_parser("table", help=HELP, description=HELP + ". Resumable: each cell is a "
                       "marag eval run folder under OUT/runs; rerun the same command to go on. "
                       "A row that fails is recorded and the others run.")
    p.add_argument("paper", choices=known_papers(), help="the seed paper")
    p.add_argument("--config", default=None, help="YAML config the rows start from")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="config override for every row, repeatable")
    p.add_argument("--model", default=None, help="model for the default LLM")
    p.add_argument("--llm", default=None, metavar="URL", help="OpenAI-compatible endpoint")
    p.add_argument("--index", default=None, metavar="PATH", help="retrieval index")
    p.add_argument("--data", default=None, metavar="DIR",
                   help="folder with the questions files (<name>.questions.jsonl, "
                        "<name>.jsonl or <name>/test.jsonl, dev.jsonl: what marag data get "
                        "writes); default: data/ (marag data get's) and ../shared/data, "
                        "the first that has a dataset")
    p.add_argument("--ids", default=None, metavar="FILE",
                   help="evaluate only the questions whose ids this file lists (a split)")
    p.add_argument("--limit", type=int, default=None,
                   help="a seeded sample of this many questions per dataset")
    p.add_argument("--seed", type=int, default=0, help="sampling seed for --limit")
    p.add_argument("--adapter", action="append", default=[], metavar="ROW=DIR|NAME",
                   help="trained weights for a row (its method name in the table, e.g. "
                        "jade=runs/train/jade/policy); marag's own committed adapters are "
                        "used where the model has one")
    p.add_argument("--rows", default=None,
                   help="comma-separated row methods to run (default: all that marag has)")
    p.add_argument("--concurrency", type=int, default=None, help="questions in flight")
    p.add_argument("--out", default=None, help="output folder (default runs/table-<paper>)")
    p.add_argument("--no-progress", action="store_true")
    p.set_defaults(func=run)


def _adapters(items: list[str]) -> dict[str, str]:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key or not value:
            raise ValueError(f"--adapter {item!r} is not ROW=DIR|NAME")
        out[key] = value
    return out


def _data_dirs(arg: str | None) -> list[Path]:
    if arg:
        return [Path(arg)]
    return [p for p in (Path("data"), Path("../shared/data")) if p.is_dir()]


def run(args: argparse.Namespace) -> int:
    from marag.report.paper_table import find_dataset, load_paper, plan_rows, stray_adapters

    try:
        table = load_paper(args.paper)
        given = _adapters(args.adapter)
        wanted = ({r.strip() for r in args.rows.split(",") if r.strip()} if args.rows
                  else None)
        if problem := stray_adapters(table, given, wanted):
            raise ValueError(problem)
    except ValueError as e:
        print(f"marag table: {e}", file=sys.stderr)
        return 2
    base = _base_overrides(args, table)
    from marag.commands.options import load_run_config

    try:
        config = load_run_config(args, base, serving=True)
    except Exception as e:  # noqa: BLE001 - a config error names its key
        print(f"marag table: {e}", file=sys.stderr)
        return 2
    model = config.llms["default"].model
    plans = plan_rows(table, model, given, backend=config.llms["default"].backend)
    if wanted is not None:
        for p in plans:
            if p.row.method not in wanted and p.method is not None:
                p.method, p.reason = None, "not asked for (--rows)"
    dirs = _data_dirs(args.data)
    files = {d: next((f for f in (find_dataset(x, d) for x in dirs) if f is not None), None)
             for d in table.question_sets}
    datasets = [d for d in table.question_sets if files[d] is not None]
    for d in datasets:
        print(f"marag table: {d}: {files[d]}", file=sys.stderr)
    if not datasets:
        where = ", ".join(map(str, dirs)) or "data/ or ../shared/data (neither exists)"
        print(f"marag table: none of {', '.join(table.question_sets)} found in {where} "
              "(marag data get NAME, or --data DIR)", file=sys.stderr)
        return 2
    ids = None
    if args.ids:
        ids = {line.strip() for line in Path(args.ids).read_text().splitlines() if line.strip()}
    out = Path(args.out or f"runs/table-{args.paper}")
    cells = {}
    for plan in plans:
        if plan.method is None:
            continue
        cells.update(_run_row(args, base, plan, datasets, files, ids, out))
    return _write(table, plans, cells, datasets, config, out)


def _base_overrides(args: argparse.Namespace, table: Any) -> list[str]:
    """The paper's setting as the default (its top-k), then the command line's."""
    from marag.commands.options import run_overrides

    out = []
    top_k = table.setting.get("top_k")
    if isinstance(top_k, int) and top_k > 0:
        out.append(f"method.top_k={top_k}")
    # each row names its own method and adapter
    out += run_overrides(argparse.Namespace(method=None, llm=args.llm, model=args.model,
                                            index=args.index, adapter=[]))
    if args.concurrency:
        out.append(f"eval.concurrency={args.concurrency}")
    return out + list(args.overrides)


def _run_row(args: argparse.Namespace, base: list[str], plan: Any, datasets: list[str],
             files: dict[str, Any], ids: set[str] | None, out: Path) -> dict[Any, Any]:
    """Every dataset of one row (one model load); a failure of the row or of one dataset is
    recorded in its cells and the table goes on."""
    import asyncio

    from marag.commands.options import check_run_config, load_run_config
    from marag.report.paper_table import Cell, with_row_adapter

    row = plan.row
    # the row's own needs first: the command line's --set still wins
    overrides = [*plan.overrides, *base, f"method.name={plan.method}"]
    cells: dict[Any, Any] = {}
    try:
        config = load_run_config(argparse.Namespace(config=args.config), overrides,
                                 serving=True)
        if plan.adapter:  # checked like a served run's config, before any run folder
            config = with_row_adapter(config, row.method, plan.adapter)
            check_run_config(config, serving=True)
        results = asyncio.run(_evaluate_row(args, config, plan, datasets, files, ids, out))
    except Exception as e:  # noqa: BLE001 - one row's failure must not lose the table
        print(f"marag table: row {row.label!r} failed: {e}", file=sys.stderr)
        return {(row.label, d): Cell(0, {}, error=f"{type(e).__name__}: {e}") for d in datasets}
    for d, (summary, error) in results.items():
        if error:
            cells[(row.label, d)] = Cell(0, {}, error=error)
            continue
        c = summary["cost"]
        cells[(row.label, d)] = Cell(summary["n"], {m: summary[m] for m in ("em", "f1", "acc")},
                                     {k: c[k] for k in ("llm_calls", "total_tokens",
                                                        "retrieval_calls", "seconds")})
    return cells


async def _evaluate_row(args: argparse.Namespace, config: Any, plan: Any, datasets: list[str],
                        files: dict[str, Any], ids: set[str] | None, out: Path
                        ) -> dict[str, tuple[dict[str, Any] | None, str]]:
    import yaml

    from marag.api import build_context
    from marag.commands.eval import record_llms
    from marag.datasets import load_questions
    from marag.eval.identity import adapter_identity, config_identity, run_info
    from marag.eval.runner import evaluate, prepare_run
    from marag.workflows import run_method

    ctx = build_context(config)
    adapters = adapter_identity(config)  # the row's adapters, hashed once for its cells
    results: dict[str, tuple[dict[str, Any] | None, str]] = {}
    name = config.method.name
    slug = plan.row.method or plan.row.label

    async def method(question: Any, context: Any) -> Any:
        return await run_method(name, question, context)

    try:
        for d in datasets:
            try:
                questions = load_questions(str(files[d]))
                if ids is not None:
                    questions = [q for q in questions if q.id in ids]
                if args.limit is not None and len(questions) > args.limit:
                    import random

                    rng = random.Random(args.seed)
                    questions = sorted(rng.sample(questions, args.limit),
                                       key=questions.index)
                if not questions:
                    results[d] = (None, "no questions (after --ids)")
                    continue
                identity = {"dataset": str(Path(files[d]).resolve()), "ids": args.ids,
                            "limit": args.limit, "seed": args.seed,
                            "config": config_identity(config), **adapters}
                run_dir = prepare_run(
                    questions, out / "runs" / slug / d, name, identity=identity,
                    info=run_info(dataset_name=questions[0].dataset),
                    files={"config.yaml": yaml.safe_dump(config.model_dump(mode="json"),
                                                         sort_keys=False)})
                record_llms(run_dir, ctx.llms, config)
                r = await evaluate(questions, method, ctx, run_dir, method_name=name,
                                   concurrency=config.eval.concurrency,
                                   question_timeout=config.eval.question_timeout,
                                   progress=not args.no_progress)
                results[d] = (r.summary, "")
            except Exception as e:  # noqa: BLE001 - the other datasets go on
                print(f"marag table: {plan.row.label} on {d} failed: {e}", file=sys.stderr)
                results[d] = (None, f"{type(e).__name__}: {e}")
    finally:
        await ctx.aclose()
    return results


def _write(table: Any, plans: Any, cells: Any, datasets: list[str], config: Any,
           out: Path) -> int:
    from marag.eval.identity import versions
    from marag.report.paper_table import plot_cost, render

    r = config.retrieval
    card = {
        "backbone": config.llms["default"].model,
        "retriever": f"{r.kind} over {r.index}" if r.index else f"server {r.url}",
        "top_k": config.method.top_k,
        "metrics": ", ".join(table.metrics),
        "prompts": f"{config.method.prompts} profile"
                   + (" + model profile" if config.method.model_prompts else ""),
        "code": f"marag {versions().get('marag', '?')}, commit {_commit()}",
    }
    md, csv_text = render(table, plans, cells, datasets, card)
    out.mkdir(parents=True, exist_ok=True)
    (out / "table.md").write_text(md)
    (out / "table.csv").write_text(csv_text)
    plot = plot_cost(plans, cells, datasets, out / "f1_vs_cost.png")
    print(md)
    wrote = [out / "table.md", out / "table.csv", *([plot] if plot else [])]
    print("wrote " + ", ".join(str(p) for p in wrote))
    return 0


def _commit() -> str:
    """The source checkout's commit (with "+changes" when it has uncommitted changes)."""
    import subprocess

    root = Path(__file__).resolve().parents[3]
    try:
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, timeout=10, check=True).stdout
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "-uno"],
                               capture_output=True, text=True, timeout=10, check=False).stdout
    except (OSError, subprocess.SubprocessError):
        return "unknown (not a git checkout)"
    return head.strip() + ("+changes" if dirty.strip() else "")
