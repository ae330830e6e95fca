"""The keyword a transformers model's ``forward`` takes its KV cache by.

transformers 5.x renamed ``past_key_values`` to ``cache`` (the old name warns on every call and
goes away in 5.40); earlier releases, which marag also supports (``transformers>=4.46``), know
only ``past_key_values`` and pass an unknown ``cache`` on to ``**kwargs`` unread. So the name is
read from the model's own signature (a PEFT wrapper's from the model it wraps), once per class.
"""

from __future__ import annotations

import functools
import inspect
from typing import Any


@functools.cache
def _for_class(cls: type) -> str:
    params = inspect.signature(cls.forward).parameters
    return "cache" if "cache" in params else "past_key_values"


def cache_kwarg(model: Any) -> str:
    """``"cache"`` or ``"past_key_values"``: what ``model.forward`` names its KV cache."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    return _for_class(type(base))
