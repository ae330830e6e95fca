"""All roles by the names used in traces (``Step.role``) and in the config's ``roles:`` map."""

from __future__ import annotations

from marag.roles import answer, decompose, mask, planner, rewrite, select
from marag.roles.base import Role

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
    )
}


def get_role(name: str) -> Role:
    try:
        return ROLES[name]
    except KeyError:
        known = ", ".join(ROLES)
        raise KeyError(f"unknown role {name!r}; known roles: {known}") from None
