"""Money spent on an LLM call, from token counts and a price table (USD per million tokens).

Prices come from the config's ``prices`` section. ``DEFAULT_PRICES`` holds a few public list
prices (OpenAI, as published for the standard API tier); a config entry for the same model
overrides them. Models with no price (local models) cost nothing.
"""

from __future__ import annotations

from marag.config import Price

# OpenAI list prices for the standard tier, USD per 1M tokens (input, output).
DEFAULT_PRICES: dict[str, Price] = {
    "gpt-4o-mini": Price(prompt_per_million=0.15, completion_per_million=0.60),
    "gpt-4o": Price(prompt_per_million=2.50, completion_per_million=10.00),
}


def find_price(model: str, prices: dict[str, Price] | None = None) -> Price | None:
    """The price for ``model``: exact name first, then the longest ``name-`` prefix
    (``gpt-4o-mini-2024-07-18`` is priced as ``gpt-4o-mini``); config before defaults."""
    for table in (prices or {}, DEFAULT_PRICES):
        if model in table:
            return table[model]
        best = max((k for k in table if model.startswith(k + "-")), key=len, default=None)
        if best is not None:
            return table[best]
    return None


def money(model: str, prompt_tokens: int, completion_tokens: int,
          prices: dict[str, Price] | None = None) -> float:
    """USD cost of one call (0.0 when the model has no price)."""
    if prompt_tokens < 0 or completion_tokens < 0:
        raise ValueError(f"token counts must be >= 0, got {prompt_tokens}, {completion_tokens}")
    price = find_price(model, prices)
    return 0.0 if price is None else charge(price, prompt_tokens, completion_tokens)


def charge(price: Price, prompt_tokens: int, completion_tokens: int) -> float:
    """USD cost of ``prompt_tokens`` + ``completion_tokens`` at ``price``."""
    return (prompt_tokens * price.prompt_per_million
            + completion_tokens * price.completion_per_million) / 1_000_000
