"""``marag config``: print the config a command would run with (bases merged, overrides applied)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from marag.commands.options import add_run_options, place_role_adapter, run_overrides

HELP = "print the resolved config (extends merged, shorthands and --set applied) as YAML"


def register(sub: Any) -> None:
    p = sub.add_parser("config", help=HELP, description=HELP + ": what marag ask, eval, "
                       "sft or train would run with the same options (a one-role --adapter "
                       "as ask and eval place it; sft and train merge every --adapter into "
                       "llms.default).")
    add_run_options(p, index_help="retrieval index", places_roles=True)
    p.add_argument("--section", metavar="NAME",
                   help="print one top-level section only (e.g. train, method, llms)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import yaml

    from marag.config import load_config

    config = place_role_adapter(load_config(args.config, run_overrides(args)
                                            + list(args.overrides)), args)
    from marag.llm.trained import misplaced_role_adapters

    for problem in misplaced_role_adapters(config):  # what ask/eval/serve would refuse
        print(f"marag config: warning: ask, eval and serve refuse this config: {problem}",
              file=sys.stderr)
    tree = config.model_dump(mode="json")
    if args.section is not None:
        if args.section not in tree:
            print(f"marag config: no section {args.section!r}; sections: "
                  + ", ".join(tree), file=sys.stderr)
            return 2
        tree = {args.section: tree[args.section]}
    sys.stdout.write(yaml.safe_dump(tree, sort_keys=False))
    return 0
