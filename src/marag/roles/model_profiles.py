"""Per-model prompt profiles: the prompt variants measured best for a model family.

A small model's reply format depends on its family: SmolLM2 (the embedded default) follows
marag's default prompts, Qwen2.5-Coder-0.5B-Instruct answers them in plain words without the
``<answer>`` tag, which JADE's and MAO-ARAG's rewards count as a malformed step. The model
an LLM entry names (``llms.NAME.model``: an embedded name, a folder or a hub id) selects its
profile here; each role then runs the profile's variant (``marag.roles.variants``) unless
``method.role_prompts`` names another, and only under ``method.prompts: default`` (the
``paper`` profile keeps each paper's prompts). ``method.model_prompts: false`` turns the
profiles off. The choices and their measurements: docs/results/prompts/README.md.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import PurePath
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from marag.config import Config

# model family key (matched inside the model's name, lower-case) -> role -> variant
MODEL_PROFILES: dict[str, dict[str, str]] = {
    "qwen2.5-coder-0.5b": {"AG": "fact-example-best-last-open"},
}


def profile_for(model: str) -> dict[str, str]:
    """The profile of ``model`` (an embedded name, a model folder or a hub id), or {}."""
    name = PurePath(model.rstrip("/\\")).name.lower() if model else ""
    for key, profile in MODEL_PROFILES.items():
        if key in name:
            return dict(profile)
    return {}


def role_prompts(model: str, chosen: Mapping[str, str], *, prompts: str = "default",
                 enabled: bool = True) -> dict[str, str]:
    """The role -> variant map a role running on ``model`` uses: the model's profile under
    ``chosen`` (``method.role_prompts``), which always wins."""
    base = profile_for(model) if enabled and prompts == "default" else {}
    return {**base, **chosen}


def resolved(config: Config) -> dict[str, str]:
    """role -> variant for every role that does not run the profile's plain prompt under
    ``config`` (model profiles and ``method.role_prompts`` together): what a run records."""
    from marag.roles.registry import ROLES

    m = config.method
    out = {}
    for role in ROLES:
        backend = config.roles.get(role, config.roles.get("default", "default"))
        llm = config.llms.get(backend)
        model = llm.model if llm is not None else ""
        variant = role_prompts(model, m.role_prompts, prompts=m.prompts,
                               enabled=m.model_prompts).get(role)
        if variant is not None:
            out[role] = variant
    return out


def profiles_used(config: Config) -> dict[str, str]:
    """LLM entry -> the model profile its model selects (entries without one left out)."""
    if config.method.prompts != "default" or not config.method.model_prompts:
        return {}
    return {name: key for name, llm in config.llms.items()
            for key in MODEL_PROFILES if key in PurePath(llm.model.rstrip("/\\")).name.lower()}
