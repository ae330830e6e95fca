"""The Retriever interface shared by local indexes and the HTTP client.

Workflows only ever see this interface, so a local BM25 index and a remote retrieval server
are interchangeable.
"""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod

from marag.types import Hits


class RetrievalError(RuntimeError):
    """Retrieval failed (unreachable server, broken index...)."""


class Retriever(ABC):
    name: str = "retriever"

    @abstractmethod
    def search_batch(self, queries: list[str], k: int) -> list[Hits]:
        """Blocking batch search: one ``Hits`` per query, best first."""

    async def search(self, queries: list[str], k: int) -> list[Hits]:
        """Non-blocking batch search; local indexes run in a worker thread off the event loop."""
        return await asyncio.to_thread(self.search_batch, queries, k)

    async def aclose(self) -> None:
        return None

    def close(self) -> None:
        return None
