"""All roles by the names used in traces (``Step.role``) and in the config's ``roles:`` map."""

from __future__ import annotations

from marag.roles import answer, planner
from marag.roles.base import Role

ROLES: dict[str, Role] = {
    r.name: r
    for r in (
        planner.ROLE,
        answer.AG,
        answer.AS,
    )
}


def get_role(name: str) -> Role:
    try:
        return ROLES[name]
    except KeyError:
        known = ", ".join(ROLES)
        raise KeyError(f"unknown role {name!r}; known roles: {known}") from None
