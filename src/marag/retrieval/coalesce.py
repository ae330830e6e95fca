"""Merging concurrent retrieval requests into shared batch searches.

Agents retrieve for one sub-question at a time, so a busy retriever sees many one-query
requests. A search has a fixed cost that a batch pays once: query encoding for dense indexes,
tokeniser and top-k set-up for BM25, and for a remote index a whole HTTP round trip.
``Coalescer`` runs at most ``concurrency`` searches at a time; requests that arrive while all
of them are busy wait in a queue, and the next free worker takes every waiting request with the
same ``k`` (up to ``max_batch`` queries) in one call. An idle retriever therefore adds no delay,
and a loaded one batches by itself. The server uses it around ``search_batch`` in worker
threads, ``RetrieverClient`` around its HTTP requests.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from marag.types import Hits

AsyncSearch = Callable[[list[str], int], Awaitable[list[Hits]]]


@dataclass(slots=True)
class _Waiting:
    queries: list[str]
    k: int
    future: asyncio.Future[list[Hits]]


class Coalescer:
    def __init__(self, search: AsyncSearch, *, concurrency: int = 4, max_batch: int = 1024) -> None:
        if concurrency < 1 or max_batch < 1:
            raise ValueError("Coalescer needs concurrency >= 1 and max_batch >= 1")
        self.search = search
        self.concurrency = concurrency
        self.max_batch = max_batch
        self.waiting: list[_Waiting] = []
        self.workers: set[asyncio.Task[None]] = set()
        self.calls = 0  # search calls made (for tests and stats)

    async def submit(self, queries: list[str], k: int) -> list[Hits]:
        """Hits for ``queries`` (one per query, as ``search`` returns them)."""
        item = _Waiting(queries, k, asyncio.get_running_loop().create_future())
        self.waiting.append(item)
        # a worker whose event loop was closed under it (a test client, a reload) never finishes
        self.workers = {w for w in self.workers if not w.done() and not w.get_loop().is_closed()}
        if len(self.workers) < self.concurrency:
            self.workers.add(asyncio.ensure_future(self._drain()))
        return await item.future

    def _take(self) -> list[_Waiting]:
        first = self.waiting[0]
        taken, size, rest = [], 0, []
        for item in self.waiting:
            fits = item.k == first.k and (not taken or size + len(item.queries) <= self.max_batch)
            if fits and not item.future.done():  # done = the client went away while waiting
                taken.append(item)
                size += len(item.queries)
            elif not item.future.done():
                rest.append(item)
        self.waiting = rest
        return taken

    async def _drain(self) -> None:
        while self.waiting:
            batch = self._take()
            if not batch:
                continue
            queries = [q for item in batch for q in item.queries]
            self.calls += 1
            try:
                hits = await self.search(queries, batch[0].k)
            except Exception as e:  # noqa: BLE001 - every request in the batch gets the failure
                for item in batch:
                    if not item.future.done():
                        item.future.set_exception(e)
                continue
            start = 0
            for item in batch:
                part = hits[start : start + len(item.queries)]
                start += len(item.queries)
                if not item.future.done():
                    item.future.set_result(part)
