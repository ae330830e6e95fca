"""Roles are data: a prompt builder, a parser and the role's validity rules.

A parser never raises on model text. It returns what it could extract, whether the output
honoured the role's format contract, and why not.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

Messages = list[dict[str, str]]


@dataclass(frozen=True, slots=True)
class Parsed:
    value: Any
    valid: bool = True
    reason: str = ""


@dataclass(frozen=True, slots=True)
class Role:
    """One agent role.

    ``build(**inputs)`` returns the chat messages for this call; ``parse(text, **inputs)``
    turns the completion into a ``Parsed`` (the inputs let a parser check, e.g., that selected
    document ids are in range). ``stop`` and ``max_tokens`` are the role's decoding limits.
    """

    name: str
    build: Callable[..., Messages]
    parse: Callable[..., Parsed]
    max_tokens: int = 128
    stop: tuple[str, ...] = ()
    description: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
