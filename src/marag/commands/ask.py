"""``marag ask "question"``: answer one question and show what every agent did."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from marag.commands.options import add_run_options, load_run_config, run_overrides

HELP = "answer one question with a multi-agent RAG method and print the trace"


def register(sub: Any) -> None:
    p = sub.add_parser(
        "ask", help=HELP,
        description=HELP + ". With no options it runs offline: the embedded SmolLM2 model and "
        "the built-in wiki-demo BM25 index.")
    p.add_argument("question", help="the question to answer")
    add_run_options(p, index_help="retrieval index directory or built-in corpus",
                    places_roles=True)
    p.add_argument("--k", type=int, default=None,
                   help="documents per retrieval; sets method.top_k")
    p.add_argument("--answer", dest="golden", action="append", default=[], metavar="TEXT",
                   help="a golden answer (repeatable): the trace then carries EM/F1/Acc")
    out = p.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="print the Trace as JSON")
    out.add_argument("--quiet", action="store_true", help="print only the answer")
    p.set_defaults(func=run)


def flag_overrides(args: argparse.Namespace) -> list[str]:
    """The shorthand options as ``key=value`` overrides (before the explicit ``--set`` ones)."""
    out = run_overrides(args)
    if args.k is not None:
        out.append(f"method.top_k={args.k}")
    return out + list(args.overrides)


def run(args: argparse.Namespace) -> int:
    import asyncio
    import json

    from marag.api import ask_async
    from marag.types import EMPTY_QUESTION, is_blank
    from marag.view.text import render_trace

    if is_blank(args.question):
        print(f"marag ask: {EMPTY_QUESTION}", file=sys.stderr)
        return 2
    config = load_run_config(args, flag_overrides(args))
    try:
        trace = asyncio.run(ask_async(args.question, config=config,
                                      golden_answers=args.golden))
    except (FileNotFoundError, ValueError, RuntimeError, ImportError) as e:
        # building a backend or opening an index failed before any question ran
        print(f"marag ask: {type(e).__name__}: {e}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(trace.to_dict(), ensure_ascii=False, indent=1))
    elif args.quiet:
        print(trace.answer if trace.answer is not None else "")
    else:
        print(render_trace(trace, color=sys.stdout.isatty()))
    if trace.status == "failed":
        if args.quiet or args.json:
            print(f"marag ask: failed: {trace.error}", file=sys.stderr)
        return 1
    return 0
