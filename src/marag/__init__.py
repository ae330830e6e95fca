"""marag: multi-agent retrieval-augmented generation.

``import marag`` is light: torch, transformers and faiss load only when a component needs them.
"""

from __future__ import annotations

from typing import Any

from marag.jax_tf import set_env_defaults
from marag.version import __version__

# before anything heavy loads: JAX/TensorFlow, if something starts them, take GPU memory as
# they need it, not up front (a value the user set is kept)
set_env_defaults()

__all__ = ["__version__", "ask", "ask_async"]


def ask(question: str, **kwargs: Any) -> Any:
    """Answer one question with a method (default ``jade``) and return its Trace."""
    from marag.api import ask as _ask

    return _ask(question, **kwargs)


async def ask_async(question: str, **kwargs: Any) -> Any:
    from marag.api import ask_async as _ask_async

    return await _ask_async(question, **kwargs)
