"""Agent roles: prompt builders, parsers and validity rules, looked up by name."""

from marag.roles.base import Parsed, Role
from marag.roles.registry import ROLES, get_role

__all__ = ["ROLES", "Parsed", "Role", "get_role"]
