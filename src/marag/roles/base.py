"""Roles are data: a prompt builder, a parser and the role's validity rules.

A parser never raises on model text. It returns what it could extract, whether the output
honoured the role's format contract, and why not.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

Messages = list[dict[str, str]]


@dataclass(frozen=True, slots=True)
class Parsed:
    value: Any
    valid: bool = True
    reason: str = ""


@dataclass(frozen=True, slots=True)
class Role:
    """One agent role, called with its inputs only.

    ``build(**inputs)`` returns the chat messages for this call. ``parse(text, **context)``
    turns the completion into a ``Parsed``; ``parse_context(**inputs)`` derives that context
    from the same inputs (e.g. the selector's number of documents), so a caller never passes a
    value twice. ``allowed_text(**inputs)``, when set, lists the strings a restricted decoder
    may emit for these inputs (MMOA-RAG's id-only selector). ``stop`` and ``max_tokens`` are
    the role's decoding limits. Both derivations ignore inputs they do not need.

    ``reply_prefix``: text the reply starts with, written by marag into an open assistant turn
    on backends that can continue one (``continues_reply``, the local hf backend), so a small
    model cannot drift out of the output format before it starts; the model writes the rest.
    The parser reads prefix + completion. Elsewhere the prompt's instructions alone ask for it.

    ``closes_stop``: backends drop the stop string from a reply (as OpenAI's API does); a role
    that needs it (Search-R1's turns, Search-o1's queries: continued as one text) gets the
    closing tag or marker put back.

    ``cache_prompt``: the role's next call repeats this prompt with more at its end or in its
    middle (IRCoT's steps), so a local backend's prefix cache keeps the whole prompt, not only
    its leading turns (``SamplingParams.cache_prompt``).
    """

    name: str
    build: Callable[..., Messages]
    parse: Callable[..., Parsed]
    max_tokens: int = 128
    stop: tuple[str, ...] = ()
    parse_context: Callable[..., dict[str, Any]] | None = None
    allowed_text: Callable[..., tuple[str, ...]] | None = None
    reply_prefix: str = ""
    # a reply that stopped on one of ``stop`` gets that closing tag back (``tags.reclose``):
    # the text then holds the whole block the model wrote, as a continuing role needs
    closes_stop: bool = False
    cache_prompt: bool = False

    def read(self, text: str, inputs: Mapping[str, Any]) -> Parsed:
        """Parse a completion of the call that was built from ``inputs``."""
        if self.parse_context is None:
            return self.parse(text)
        return self.parse(text, **self.parse_context(**inputs))

    def constraint(self, inputs: Mapping[str, Any]) -> tuple[str, ...]:
        """What a restricted decoder may emit for ``inputs``; an error for a role without one."""
        if self.allowed_text is None:
            raise ValueError(f"role {self.name!r} has no decoding constraint")
        return self.allowed_text(**inputs)
