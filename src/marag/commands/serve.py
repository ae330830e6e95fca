"""``marag serve``: the HTTP API and web page (ask live, browse run directories)."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from marag.commands.options import add_run_options, load_run_config, run_overrides

HELP = "serve the web page and HTTP API: ask questions live, browse evaluation runs"


def register(sub: Any) -> None:
    p = sub.add_parser(
        "serve", help=HELP,
        description=HELP + ". The model and index are loaded once at start and shared by every "
        "request. Binds 127.0.0.1 unless told otherwise.")
    add_run_options(p, index_help="retrieval index directory or built-in corpus",
                    places_roles=True)
    p.add_argument("--runs", default="runs", metavar="DIR",
                   help="directory whose sub-directories are run directories (default: runs)")
    p.add_argument("--host", default="127.0.0.1",
                   help="address to bind (default 127.0.0.1; use 0.0.0.0 only with --token on a "
                        "trusted network)")
    p.add_argument("--port", type=int, default=8000, help="port (default 8000)")
    p.add_argument("--token", nargs="?", const="", default=None,
                   help="require 'Authorization: Bearer TOKEN' on every /api route; with no "
                        "value the token is read from $MARAG_TOKEN (which alone also enables it)")
    p.add_argument("--max-concurrent-asks", type=int, default=16,
                   help="questions answered at once; more get HTTP 429 (default 16)")
    p.add_argument("--max-question-chars", type=int, default=2000,
                   help="longest question accepted (default 2000)")
    p.add_argument("--ask-timeout", type=float, default=600.0,
                   help="seconds before a question is given up (default 600)")
    p.set_defaults(func=run)


def token(args: argparse.Namespace) -> str | None:
    """``--token VALUE``, else ``$MARAG_TOKEN`` (required when ``--token`` has no value)."""
    from marag.web.settings import TOKEN_ENV

    if args.token:
        return str(args.token)
    env = os.environ.get(TOKEN_ENV) or None
    if args.token == "" and env is None:
        raise ValueError(f"--token without a value needs ${TOKEN_ENV} to be set")
    return env


def run(args: argparse.Namespace) -> int:
    if not 0 < args.port < 65536:
        print("marag serve: --port must be in 1..65535", file=sys.stderr)
        return 2
    from pydantic import ValidationError

    from marag.api import build_context
    from marag.web.settings import ServeSettings

    try:
        settings = ServeSettings(runs=args.runs, token=token(args),
                                 max_concurrent_asks=args.max_concurrent_asks,
                                 max_question_chars=args.max_question_chars,
                                 ask_timeout=args.ask_timeout)
    except (ValueError, ValidationError) as e:
        print(f"marag serve: {e}", file=sys.stderr)
        return 2
    config = load_run_config(args, run_overrides(args) + list(args.overrides))
    try:
        # any method may be asked for, so the index is opened even if the default needs none
        ctx = build_context(config, with_retriever=True)
    except (FileNotFoundError, ValueError, RuntimeError, ImportError) as e:
        print(f"marag serve: {type(e).__name__}: {e}", file=sys.stderr)
        return 2
    import uvicorn

    from marag.web.app import create_app

    where = "" if settings.token is None else " (bearer token required on /api)"
    print(f"marag serve: http://{args.host}:{args.port}/ — runs from {settings.runs}{where}",
          file=sys.stderr)
    uvicorn.run(create_app(ctx, settings), host=args.host, port=args.port, log_level="warning")
    return 0
