"""A small real retriever for the server and client tests: word overlap over real passages.

Scores a passage by the fraction of the query's words it contains (ties: corpus order), so
scores are non-integer floats that must survive JSON exactly. It records every batch it
served and can fail its first calls, as an index that is still warming up would.
"""

from __future__ import annotations

import re
import threading
from pathlib import Path

from marag.retrieval.base import Retriever
from marag.types import Hits, Passage, iter_jsonl


def words(s: str) -> set[str]:
    return set(re.findall(r"[a-z0-9]+", s.lower()))


def load_passages(qa_data: Path, n: int = 60) -> list[Passage]:
    out = []
    for _, obj in iter_jsonl(qa_data / "nq_open.corpus.jsonl"):
        out.append(Passage(id=obj["id"], title=obj["title"], text=obj["text"]))
        if len(out) == n:
            break
    return out


class WordOverlapRetriever(Retriever):
    name = "overlap"

    def __init__(self, passages: list[Passage], fail_first: int = 0) -> None:
        self.passages = passages
        self.bags = [words(p.title + " " + p.text) for p in passages]
        self.fail_first = fail_first
        self.calls: list[list[str]] = []  # the query batches asked for, failed ones included
        self.lock = threading.Lock()

    def __len__(self) -> int:
        return len(self.passages)

    def search_batch(self, queries: list[str], k: int) -> list[Hits]:
        with self.lock:
            self.calls.append(list(queries))
            if len(self.calls) <= self.fail_first:
                raise RuntimeError("index is warming up")
        out = []
        for q in queries:
            qw = words(q)
            scored = sorted(
                ((len(qw & bag) / max(len(qw), 1), -i) for i, bag in enumerate(self.bags)),
                reverse=True,
            )[:k]
            out.append(Hits(q, [self.passages[-i] for _, i in scored], [s for s, _ in scored]))
        return out
