"""``marag sft``: supervised warm start from traces (rejection sampling) or MMOA-RAG's recipe."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from marag.commands.options import add_run_options, load_run_config, run_overrides

HELP = "supervised fine-tuning of chosen roles (warm start before marag train)"


def register(sub: Any) -> None:
    p = sub.add_parser("sft", help=HELP, description=HELP + ". The adapter goes to OUT/policy; "
                       "use it with --adapter, or as llms.default.adapter of a training config.")
    add_run_options(p, index_help="retrieval index (for --recipe mmoa)")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--traces", nargs="+", metavar="FILE",
                     help="traces.jsonl files (marag eval runs, marag train rollouts): keep the "
                          "valid steps of traces with F1 >= sft.min_f1")
    src.add_argument("--recipe", choices=["mmoa"],
                     help="mmoa: selector and generator labels built from questions, their "
                          "golden answers and their top method.candidates (K = 10) "
                          "retrieved documents (MMOA-RAG S4.3); no rewriter labels (use "
                          "--traces with sft.roles=[mmoa.QR])")
    p.add_argument("--dataset", help="question file for --recipe")
    p.add_argument("--exclude-ids", metavar="FILE",
                   help="question ids never to train on, one per line (e.g. a training run's "
                        "splits/heldout_ids.txt, so the warm start does not see held-out "
                        "answers)")
    p.add_argument("--out", required=True, metavar="DIR")
    p.add_argument("--no-progress", action="store_true")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import asyncio

    from marag.api import build_context
    from marag.train import sft
    from marag.types import Trace, read_jsonl

    config = load_run_config(args, run_overrides(args) + list(args.overrides))
    cfg = config.sft
    if args.traces:
        traces = [t for f in args.traces for t in read_jsonl(f, Trace)]
        if args.exclude_ids:
            banned = set(Path(args.exclude_ids).read_text().split())
            traces = [t for t in traces if t.id not in banned]
        examples = sft.examples_from_traces(traces, cfg.roles, cfg.min_f1)
        ctx = build_context(config, with_retriever=False, purpose="training")
    else:
        if not args.dataset:
            print("marag sft: --recipe needs --dataset", file=sys.stderr)
            return 2
        from marag.datasets import load_questions

        ctx = build_context(config, with_retriever=True, purpose="training")
        questions = load_questions(args.dataset)
        if args.exclude_ids:
            banned = set(Path(args.exclude_ids).read_text().split())
            questions = [q for q in questions if q.id not in banned]
        if cfg.max_examples:
            from marag.datasets import sample

            questions = sample(questions, cfg.max_examples, seed=cfg.seed)
        examples = asyncio.run(sft.examples_mmoa(questions, ctx.retriever, config))
        if cfg.roles:
            examples = [e for e in examples if e.role in cfg.roles]
    print(f"{len(examples)} examples: " + ", ".join(
        f"{r} {sum(e.role == r for e in examples)}" for r in sorted({e.role for e in examples})))
    backend = ctx.llms[config.backend_for(examples[0].role if examples else "default")]
    if not hasattr(backend, "module"):
        print("marag sft: the roles must run on the local hf backend", file=sys.stderr)
        return 2
    try:
        rows = sft.train_sft(backend, examples, cfg, Path(args.out),
                             progress=not args.no_progress)
    except ValueError as e:
        print(f"marag sft: {e}", file=sys.stderr)
        return 2
    print(f"{len(rows)} steps, last loss {rows[-1]['loss']:.4f}; adapter in "
          f"{Path(args.out) / 'policy'}")
    return 0
