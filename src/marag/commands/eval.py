"""``marag eval``: run a method over a benchmark into a resumable run directory."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from marag.commands.options import add_run_options, load_run_config, run_overrides

HELP = "evaluate a method on a QA dataset (resumable; writes traces, metrics.json, report.md)"


def register(sub: Any) -> None:
    p = sub.add_parser(
        "eval", help=HELP, description=HELP + ". Rerunning the same command resumes: questions "
        "already in OUT/traces.jsonl are skipped; a trace torn by a crash is rerun.")
    p.add_argument("--dataset", required=True,
                   help="benchmark name (hotpotqa, nq_open, ...) or a questions .jsonl file")
    p.add_argument("--split", default=None, help="dataset split for named benchmarks")
    p.add_argument("--limit", type=int, default=None,
                   help="evaluate only this many questions (a seeded sample); sets eval.limit")
    p.add_argument("--seed", type=int, default=None, help="sampling seed for --limit; sets eval.seed")
    p.add_argument("--concurrency", type=int, default=None,
                   help="questions in flight at once; sets eval.concurrency (default 16)")
    p.add_argument("--question-timeout", type=float, default=None, metavar="SECONDS",
                   help="record a question as failed when its workflow runs longer than this; "
                        "sets eval.question_timeout (default: no limit)")
    add_run_options(p, index_help="retrieval index directory or built-in corpus name",
                    places_roles=True)
    p.add_argument("--out", default=None,
                   help="run directory (default: runs/<method>-<dataset>)")
    p.add_argument("--force", action="store_true",
                   help="reuse OUT even if it holds a different run (its traces are moved aside)")
    p.add_argument("--retry-failed", action="store_true",
                   help="rerun questions recorded as failed in OUT")
    p.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    p.set_defaults(func=run)


def flag_overrides(args: argparse.Namespace) -> list[str]:
    """The options that are shorthands for config keys, as ``key=value`` overrides."""
    out = run_overrides(args)
    if args.limit is not None:
        out.append(f"eval.limit={args.limit}")
    if args.seed is not None:
        out.append(f"eval.seed={args.seed}")
    if args.concurrency is not None:
        out.append(f"eval.concurrency={args.concurrency}")
    if args.question_timeout is not None:
        out.append(f"eval.question_timeout={args.question_timeout}")
    return out + list(args.overrides)


def default_out(method: str, dataset: str) -> Path:
    return Path("runs") / f"{method}-{Path(dataset).name.split('.')[0]}"


def print_summary(out_dir: Path, s: dict[str, Any]) -> None:
    c = s["cost"]
    print(f"{out_dir}: {s['n']} questions, {s['failed']} failed, {s['budget']} budget-limited")
    print(f"  EM {100 * s['em']:.2f}  F1 {100 * s['f1']:.2f}  Acc {100 * s['acc']:.2f}  "
          f"(F1 over successful items {100 * s['ok']['f1']:.2f})")
    print(f"  per question: {c['llm_calls']:.2f} LLM calls, {c['total_tokens']:.0f} tokens, "
          f"{c['retrieval_calls']:.2f} retrievals, {c['rounds']:.2f} rounds, "
          f"{c['seconds']:.2f} s, ${c['money']:.6f}")
    print(f"  metrics: {out_dir / 'metrics.json'}  report: {out_dir / 'report.md'}")


def record_llms(run_dir: Any, llms: dict[str, Any], config: Any = None) -> None:
    """Write what each backend really loaded (``dtype: auto`` resolved, device, threads) into
    the run's manifest; a resumed run records its latest session's."""
    from marag.eval.rundir import MANIFEST
    from marag.llm.factory import llm_info

    run_dir.manifest["llms"] = {name: llm_info(llm) for name, llm in llms.items()}
    if config is not None:
        from marag.roles.model_profiles import profiles_used, resolved

        # the prompts the run's roles used where they are not marag's defaults
        run_dir.manifest["model_profiles"] = profiles_used(config)
        run_dir.manifest["role_prompts"] = resolved(config)
    run_dir.write_json(MANIFEST, run_dir.manifest)


def run(args: argparse.Namespace) -> int:
    import asyncio

    from marag.eval.rundir import RunDirError

    config = load_run_config(args, flag_overrides(args))
    out = Path(args.out) if args.out else default_out(config.method.name, args.dataset)
    try:
        result = asyncio.run(_run(args, config, out))
    except RunDirError as e:
        print(f"marag eval: {e}", file=sys.stderr)
        return 2
    except (FileNotFoundError, ValueError) as e:
        print(f"marag eval: {e}", file=sys.stderr)
        return 2
    print_summary(result.out_dir, result.summary)
    s = result.summary
    return 1 if s["n"] and s["failed"] == s["n"] else 0


async def _run(args: argparse.Namespace, config: Any, out: Path) -> Any:
    import yaml

    from marag.datasets import load_questions
    from marag.eval.identity import adapter_identity, config_identity, run_info
    from marag.eval.runner import evaluate, prepare_run

    questions = load_questions(args.dataset, limit=config.eval.limit, seed=config.eval.seed,
                               split=args.split)
    name = config.method.name
    dataset_path = Path(args.dataset)
    # A file is named by its absolute path, so resuming from another directory is the same run.
    dataset = str(dataset_path.resolve()) if dataset_path.exists() else args.dataset
    identity = {"dataset": dataset, "split": args.split, "limit": config.eval.limit,
                "seed": config.eval.seed, "config": config_identity(config),
                **adapter_identity(config)}
    info = run_info(dataset_name=questions[0].dataset if questions else None)
    config_yaml = yaml.safe_dump(config.model_dump(mode="json"), sort_keys=False)
    # The directory check comes before building models and indexes, so a mismatch fails fast.
    run_dir = prepare_run(questions, out, name, identity=identity, info=info,
                          files={"config.yaml": config_yaml}, force=args.force,
                          retry_failed=args.retry_failed)

    from marag.api import build_context
    from marag.workflows import run_method

    ctx = build_context(config)
    record_llms(run_dir, ctx.llms, config)

    async def method(question: Any, context: Any) -> Any:
        return await run_method(name, question, context)

    try:
        return await evaluate(questions, method, ctx, run_dir, method_name=name,
                              concurrency=config.eval.concurrency,
                              question_timeout=config.eval.question_timeout,
                              progress=not args.no_progress)
    finally:
        closer = getattr(ctx, "aclose", None)
        if closer is not None:
            await closer()
