"""The ``marag`` command line. Each sub-command lives in ``marag.commands.<module>``.

Command modules only declare arguments at import time; heavy imports happen inside their
``run`` functions so ``marag --help`` stays fast.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys

# module name in marag.commands -> it registers one or more sub-commands
COMMAND_MODULES = [
    "ask",
    "index",
    "search",
    "serve_retriever",
    "serve_llm",
    "serve",
    "eval",
    "table",
    "report",
    "train",
    "sft",
    "models",
    "data",
    "config",
]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="marag",
        description="Multi-agent retrieval-augmented generation (JADE, MAO-ARAG, MMOA-RAG, M-ASK).",
    )
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more logging (-vv debug)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(f"marag.commands.{name}").register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    level = logging.WARNING - 10 * args.verbose
    logging.basicConfig(level=max(level, logging.DEBUG), format="%(levelname)s %(name)s: %(message)s")
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    from marag.config import ConfigError

    try:
        return int(args.func(args) or 0)
    except ConfigError as e:
        print(f"marag: config error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
