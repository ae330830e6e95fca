"""Agent roles: prompt builders, parsers and validity rules, looked up by name."""

from marag.roles.base import Parsed, Role
from marag.roles.registry import PROFILES, ROLES, get_role, role_for

__all__ = ["PROFILES", "ROLES", "Parsed", "Role", "get_role", "role_for"]
