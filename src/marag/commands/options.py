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


def add_run_options(p: Any, *, index_help: str, places_roles: bool = False) -> None:
    """The shared options. ``places_roles``: the command runs a method as it is served (ask,
    eval, serve, config), so a registered one-role adapter given alone to ``--adapter``
    serves its role only (:func:`place_role_adapter`); otherwise (sft, train: the adapters are
    the policy's warm start) every adapter is merged into the default LLM."""
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
                        "on), merged into the default hf model; repeatable, merged in order"
                        + ("; a name trained for one role ("
                           + ", ".join(f"{n}: {t.role}" for n, t in sorted(TRAINED.items())
                                       if t.role)
                           + ") serves that role alone, given alone" if places_roles else ""))
    p.set_defaults(place_roles=places_roles)


def load_run_config(args: argparse.Namespace, overrides: list[str], *,
                    serving: bool | None = None) -> Config:
    """The config of a run command. Role names under ``roles:`` are checked here too, so a
    misspelt one fails before a run directory, a model or an index is touched; so is an
    opt-in model that has not been installed. ``serving``: whether the command serves its
    method (:func:`check_run_config`; by default, whether it places roles)."""
    from marag.config import load_config

    config = place_role_adapter(load_config(args.config, overrides), args)
    if serving is None:
        serving = getattr(args, "place_roles", False)
    check_run_config(config, serving=serving)
    return config


def role_adapter(args: argparse.Namespace) -> str | None:
    """The registered one-role adapter ``--adapter`` names, when the command places roles
    (``args.place_roles``); it must come alone, since the roles it leaves take its run's
    ``team`` adapters, not the other ``--adapter`` entries."""
    from marag.config import ConfigError
    from marag.llm.trained import one_role

    given = list(getattr(args, "adapter", None) or [])
    if not getattr(args, "place_roles", False):
        return None
    named = [a for a in given if one_role(a)]
    if not named:
        return None
    if len(given) > 1:
        raise ConfigError(f"--adapter {named[0]} serves the role {one_role(named[0])} alone "
                          "(the other roles take the adapters its run trained beside it): "
                          "give it alone, or pass its folders as paths to merge them into "
                          "every role")
    return named[0]


def place_role_adapter(config: Config, args: argparse.Namespace) -> Config:
    """``config`` with the one-role adapter of ``--adapter`` (:func:`role_adapter`), if any,
    serving its role alone (``llms.trained``). Refused, with the fix, when the config runs
    another method than the one its run trained the role in, serves the role with another
    model, or already gives an LLM adapters (from the config file or ``--set``): the other
    roles' adapters are the run's ``team``, and a ``--set`` must not be silently replaced."""
    from marag.config import ConfigError
    from marag.llm.trained import TRAINED, serves_alone, with_role_adapter

    name = role_adapter(args)
    if name is None:
        return config
    spec = TRAINED[name]
    assert spec.role is not None
    if spec.method is not None and config.method.name != spec.method:
        raise ConfigError(f"--adapter {name} is {spec.method}'s {spec.role} role, trained in "
                          f"that method: run it with --method {spec.method} (this run's "
                          f"method is {config.method.name})")
    if serves_alone(config, spec.role, name):
        return config  # a config made for it
    entry = config.backend_for(spec.role)
    model = config.llms[entry].model
    if model != spec.model:
        fix = "--model" if entry == "default" else f"--set llms.{entry}.model="
        raise ConfigError(f"--adapter {name} was trained on {spec.model}, not {model}; use "
                          f"it with {fix}{' ' if fix == '--model' else ''}{spec.model}")
    given = {n: llm.adapter for n, llm in config.llms.items() if llm.adapter}
    if given:
        raise ConfigError(f"--adapter {name} serves {spec.role} alone and gives the other "
                          "roles the adapters its run trained beside it, but the config "
                          + ", ".join(f"llms.{n}.adapter={a}" for n, a in given.items())
                          + " already sets adapters: drop one of the two")
    return with_role_adapter(config, spec.role, name, label=f"--adapter {name}")


def check_run_config(config: Config, *, serving: bool = False) -> None:
    """What :func:`load_run_config` checks, for a config built some other way (``marag
    table``'s row with its adapter): role names, opt-in models, adapters; and, when the run
    serves its method (``serving``: ask, eval, serve, a table row), that no one-role adapter
    would serve roles it was not trained for (:func:`marag.llm.trained.misplaced_role_adapters`)."""
    from marag.config import ConfigError
    from marag.llm.base import LLMError
    from marag.llm.embedded import opt_in_problem
    from marag.llm.trained import misplaced_role_adapters, resolve_adapters
    from marag.roles.registry import check_roles

    check_roles(config)
    problems = misplaced_role_adapters(config) if serving else []
    if problems:
        raise ConfigError(problems[0])
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
    if getattr(args, "adapter", None) and role_adapter(args) is None:  # else placed on load
        import json

        out.append(f"llms.default.adapter={json.dumps(args.adapter)}")
    return out
