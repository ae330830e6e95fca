"""Options shared by the commands that run a method (``ask``, ``eval``).

The shorthands (``--method``, ``--llm``, ``--model``, ``--index``) become ``key=value``
config overrides that apply before the explicit ``--set`` ones, so ``--set`` always wins.
"""

from __future__ import annotations

import argparse
from typing import Any

from marag.config import Config, MethodConfig
from marag.llm.trained import TRAINED
from marag.methods import METHOD_NAMES


def add_run_options(p: Any, *, index_help: str) -> None:
    default = MethodConfig.model_fields["name"].default
    p.add_argument("--method", default=None, choices=METHOD_NAMES,
                   help=f"method to run (default: method.name from the config, {default})")
    p.add_argument("--config", default=None, help="YAML config file")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="config override, repeatable (e.g. --set method.max_rounds=4); "
                        "applied after the shorthand options")
    p.add_argument("--llm", default=None, metavar="URL",
                   help="OpenAI-compatible endpoint for the default LLM "
                        "(sets llms.default.backend=openai and base_url)")
    p.add_argument("--model", default=None, help="model name for the default LLM")
    p.add_argument("--index", default=None, metavar="PATH|wiki-demo",
                   help=f"{index_help}; sets retrieval.index")
    p.add_argument("--adapter", action="append", default=[], metavar="DIR|NAME",
                   help="LoRA adapter folder from marag train/sft (its policy/ folder), or "
                        "the name of an adapter marag's learning runs trained "
                        f"({', '.join(sorted(TRAINED))}; each with the model it was trained "
                        "on), merged into the default hf model; repeatable, merged in order")


def load_run_config(args: argparse.Namespace, overrides: list[str]) -> Config:
    """The config of a run command. Role names under ``roles:`` are checked here too, so a
    misspelt one fails before a run directory, a model or an index is touched; so is an
    opt-in model that has not been installed."""
    from marag.config import load_config

    config = load_config(args.config, overrides)
    check_run_config(config)
    return config


def check_run_config(config: Config) -> None:
    """What :func:`load_run_config` checks, for a config built some other way (``marag
    table``'s row with its adapter): role names, opt-in models, adapters."""
    from marag.config import ConfigError
    from marag.llm.base import LLMError
    from marag.llm.embedded import opt_in_problem
    from marag.llm.trained import resolve_adapters
    from marag.roles.registry import check_roles

    check_roles(config)
    for name, llm in config.llms.items():
        problem = opt_in_problem(llm.model, llm.backend, llm.cache_dir)
        if problem:
            raise ConfigError(f"llms.{name}.model: {problem}")
        if llm.backend != "hf":  # adapters are merged by the hf backend only
            continue
        try:  # before a run folder exists: a wrong adapter must not leave one behind
            resolve_adapters(llm.adapter, llm.model)
        except LLMError as e:
            raise ConfigError(f"llms.{name}.adapter: {e}") from None


def run_overrides(args: argparse.Namespace) -> list[str]:
    """The shared shorthands as overrides (callers append their own, then ``args.overrides``)."""
    out = []
    if args.method:
        out.append(f"method.name={args.method}")
    if args.llm:
        out += ["llms.default.backend=openai", f"llms.default.base_url={args.llm}"]
    if args.model:
        out.append(f"llms.default.model={args.model}")
    if args.index:
        out.append(f"retrieval.index={args.index}")
    if getattr(args, "adapter", None):
        import json

        out.append(f"llms.default.adapter={json.dumps(args.adapter)}")
    return out
