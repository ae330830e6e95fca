"""All roles by the names used in traces (``Step.role``) and in the config's ``roles:`` map,
and the prompt profiles (``method.prompts``) that replace some of them for one method."""

from __future__ import annotations

import difflib
from collections.abc import Mapping

from marag.config import Config, ConfigError
from marag.roles import (
    adaptive,
    answer,
    decompose,
    deepnote,
    ircot,
    mask,
    paper_jade,
    paper_mao,
    paper_mask,
    paper_select,
    planner,
    rewrite,
    search_o1,
    search_r1,
    select,
    self_rag,
)
from marag.roles.base import Role

# The key of the config's ``roles:`` map that routes every role not named there.
DEFAULT = "default"

ROLES: dict[str, Role] = {
    r.name: r
    for r in (
        planner.ROLE,
        rewrite.ROLE,
        decompose.QDS,
        decompose.QDP,
        select.ROLE,
        answer.AG,
        answer.AS,
        decompose.MMOA_QR,
        mask.PLAN,
        mask.SEARCH,
        mask.SUMMARY,
        mask.UPDATE,
        mask.ANSWER,
        search_r1.ROLE,
        search_o1.ROLE,
        search_o1.RID_ROLE,
        adaptive.ROLE,
        ircot.ROLE,
        *deepnote.ROLES,
        self_rag.ROLE,
    )
}


# profile -> method -> the roles that profile replaces for that method (others stay default)
PROFILES: dict[str, dict[str, dict[str, Role]]] = {
    "default": {},
    "paper": {
        "jade": paper_jade.ROLES,
        "mao-arag": paper_mao.ROLES,
        "mmoa-rag": {"DS": paper_select.ROLE},
        "m-ask": paper_mask.ROLES,
    },
}


def role_for(name: str, profile: str = "default", method: str | None = None,
             variants: Mapping[str, str] | None = None) -> Role:
    """The role ``name`` as prompt profile ``profile`` writes it for ``method``, or the named
    variant ``variants[name]`` (``method.role_prompts``) when one is chosen for it."""
    if variants and name in variants:
        from marag.roles.variants import get_variant

        return get_variant(name, variants[name])
    try:
        overrides = PROFILES[profile]
    except KeyError:
        raise KeyError(f"unknown prompt profile {profile!r}; known: {', '.join(PROFILES)}") \
            from None
    role = overrides.get(method or "", {}).get(name)
    return role if role is not None else get_role(name)


def get_role(name: str) -> Role:
    try:
        return ROLES[name]
    except KeyError:
        known = ", ".join(ROLES)
        raise KeyError(f"unknown role {name!r}; known roles: {known}") from None


def check_roles(config: Config) -> None:
    """The role names a config uses: the ``roles:`` map and ``method.role_prompts``."""
    from marag.roles.variants import check_role_prompts

    check_role_map(config.roles)
    check_role_prompts(config.method.role_prompts)
    check_role_map(config.method.max_tokens, "method.max_tokens")


def check_role_map(roles: Mapping[str, object], where: str = "roles") -> None:
    """Refuse a ``roles:`` config map (or another role-keyed map, named by ``where``) with a
    key that is not a role (or ``default``): a misspelt role would otherwise run silently on
    the default backend."""
    known = [*ROLES, DEFAULT]
    for key in roles:
        if key in known:
            continue
        close = difflib.get_close_matches(key, known, n=1)
        hint = f" (did you mean '{close[0]}'?)" if close else ""
        raise ConfigError(f"unknown role '{where}.{key}'{hint}; known roles: {', '.join(known)}")
