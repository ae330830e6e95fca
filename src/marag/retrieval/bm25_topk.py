"""Exact BM25 top-k without scoring every passage (MaxScore-style pruning).

The plain way (``Postings.exhaustive``) adds every query term's whole posting list into a
score array as long as the corpus and then selects among the passages that scored: both are
linear in the corpus, ~6 ms a query at 1M passages and ~20x that at wiki-18's 21M. Most of
that time goes to the long lists of common, low-idf terms, which rarely decide the top-k.

``Postings.top`` visits terms from the largest possible contribution (the maximum of the
term's column) down. Once the k-th best partial score among the passages seen so far
exceeds what all unvisited terms together could add, no unseen passage can reach the
top-k, so the long lists are never scanned. The passages still in reach get their exact
scores by looking them up (binary search) in every query term's list, adding in the query's
token order in float32, the same additions as the plain way: scores are bit-identical and
ties are ordered the same (lower row first). Bounds are compared with a margin, so rounding
can only make the pruning more cautious, never drop a passage that belongs in the top-k.

It applies when every entry of the query's columns is positive (BM25's Lucene variant; the
Robertson idf can be negative) and each column's rows are ascending (marag's builder writes
them so; a column found otherwise falls back to the plain way).
"""

from __future__ import annotations

import threading

import numpy as np

MARGIN = 1e-4  # relative slack on bounds: far above float32 rounding of a few additions
LOOKUP_COST = 16  # a binary search in a column against adding one of its entries


def top_hits(scores: np.ndarray, k: int, rows: np.ndarray | None = None
             ) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` best among the entries scoring above zero, best first, ties broken by the
    lower row (the earlier corpus line), at the cut too; padded with row -1 and score 0.
    ``scores`` is every passage's score, or with ``rows`` the scores of just those passages
    (in any order).

    Selecting among the hits only keeps this fast at any corpus size: bm25s's ``topk``
    partitions the whole score array, mostly zeros, which at 1M passages took ~200 ms a
    query (numpy's partition is slow on long runs of equal values). bm25s orders tied
    scores as its partition happens to leave them, and picks any of those tied at the cut.
    """
    hits = np.flatnonzero(scores > 0)
    row_of = hits if rows is None else rows[hits]
    if len(hits) > k:
        s = scores[hits]
        kth = np.partition(s, len(s) - k)[len(s) - k]
        above = np.flatnonzero(s > kth)
        tied = np.flatnonzero(s == kth)
        tied = tied[np.argsort(row_of[tied], kind="stable")][: k - len(above)]
        pick = np.concatenate([above, tied])
        hits, row_of = hits[pick], row_of[pick]
    order = np.lexsort((row_of, -scores[hits]))
    out_rows = np.full(k, -1, np.int64)
    top = np.zeros(k, np.float32)
    out_rows[: len(hits)] = row_of[order]
    top[: len(hits)] = scores[hits[order]]
    return out_rows, top


class Postings:
    """A BM25 score matrix in CSC form (bm25s's ``data``/``indices``/``indptr``), searched
    for the exact top-k. Thread-safe: per-thread work arrays, shared read-only caches."""

    def __init__(self, data: np.ndarray, rows: np.ndarray, indptr: np.ndarray,
                 num_docs: int) -> None:
        self.data, self.rows, self.indptr, self.num_docs = data, rows, indptr, num_docs
        self._bounds: dict[int, tuple[float, bool]] = {}  # term -> (max, prunable)
        self._lock = threading.Lock()
        self._local = threading.local()

    def column(self, t: int) -> tuple[np.ndarray, np.ndarray]:
        lo, hi = self.indptr[t], self.indptr[t + 1]
        return self.rows[lo:hi], self.data[lo:hi]

    def bound(self, t: int) -> tuple[float, bool]:
        """The column's largest entry, and whether pruning may use it (every entry positive,
        rows ascending); computed once per term, on first use."""
        hit = self._bounds.get(t)
        if hit is None:
            rows, data = self.column(t)
            if len(data) == 0:
                hit = (0.0, True)
            else:
                ok = bool(data.min() > 0) and bool(np.all(rows[1:] > rows[:-1]))
                hit = (float(data.max()), ok)
            with self._lock:
                self._bounds[t] = hit
        return hit

    def exhaustive(self, token_ids: list[int]) -> np.ndarray:
        """Every passage's score; float32 adds in bm25s's order, so bit-identical.

        bm25s accumulates with ``np.add.at``; a column's rows are unique, so a fancy-index
        ``+=`` does the same float32 additions several times faster.
        """
        scores = np.zeros(self.num_docs, dtype=np.float32)
        for t in token_ids:
            rows, data = self.column(t)
            scores[rows] += data
        return scores

    def visited(self) -> int:
        """Posting entries the last pruned ``top`` of this thread added up in full (the
        columns it looked candidates up in are not counted)."""
        return int(getattr(self._local, "visited", 0))

    def _buffer(self) -> np.ndarray:
        buf = getattr(self._local, "buf", None)
        if buf is None:  # zero between queries: only the entries a query touched are reset
            buf = self._local.buf = np.zeros(self.num_docs, dtype=np.float32)
        return buf

    def top(self, token_ids: list[int], k: int) -> tuple[np.ndarray, np.ndarray]:
        """Rows and scores of the ``k`` best passages (as ``top_hits(exhaustive(ids), k)``)."""
        terms = sorted(set(token_ids))
        bounds = {t: self.bound(t) for t in terms}
        if k <= 0 or not all(ok for _, ok in bounds.values()):
            return top_hits(self.exhaustive(token_ids), k)
        times = {t: token_ids.count(t) for t in terms}  # a repeated token adds its column again
        # visit terms from the largest possible contribution down (ties: lower id first)
        visit = sorted(terms, key=lambda t: (-bounds[t][0] * times[t], t))
        left = [0.0] * (len(visit) + 1)  # what the terms from i on could still add
        for i in range(len(visit) - 1, -1, -1):
            left[i] = left[i + 1] + bounds[visit[i]][0] * times[visit[i]]
        buf = self._buffer()
        seen: list[np.ndarray] = []
        n_seen = 0
        self._local.visited = 0
        try:
            for i, t in enumerate(visit):
                rows, data = self.column(t)
                self._local.visited += len(rows)
                fresh = rows[buf[rows] == 0]  # positive entries: zero means not seen yet
                seen.append(fresh)
                n_seen += len(fresh)
                buf[rows] += data * np.float32(times[t])
                rest = left[i + 1] * (1 + MARGIN)
                if rest == 0 or n_seen < k:
                    continue
                cand = np.concatenate(seen)
                partial = buf[cand]
                kth = float(np.partition(partial, len(partial) - k)[len(partial) - k])
                if rest < kth * (1 - MARGIN):
                    # unseen passages score at most `rest` < kth: out of reach. Seen ones
                    # out of reach too unless their partial plus `rest` could reach kth.
                    keep = cand[partial.astype(np.float64) + rest >= kth * (1 - MARGIN)]
                    return top_hits(self._exact(keep, token_ids, buf, seen), k, rows=keep)
            # every term visited: the seen passages are all the passages that scored
            cand = np.concatenate(seen) if seen else np.empty(0, np.int64)
            return top_hits(self._exact(cand, token_ids, buf, seen), k, rows=cand)
        finally:
            for s in seen:
                buf[s] = 0

    def _exact(self, cand: np.ndarray, token_ids: list[int], buf: np.ndarray,
               seen: list[np.ndarray]) -> np.ndarray:
        """Exact scores of the rows ``cand``, the float32 additions of
        ``exhaustive`` in its order: looked up in each column when ``cand`` is small, else
        the columns added again into the (cleared) buffer, whichever reads less."""
        cols = [self.column(t) for t in token_ids]
        scan = sum(len(r) for r, _ in cols)
        if len(cand) * len(cols) * LOOKUP_COST <= scan:
            scores = np.zeros(len(cand), dtype=np.float32)
            for rows, data in cols:
                if len(rows) == 0 or len(cand) == 0:
                    continue
                pos = np.searchsorted(rows, cand)
                found = pos < len(rows)
                found[found] = rows[pos[found]] == cand[found]
                scores[found] += data[pos[found]]
            return scores
        for s in seen:
            buf[s] = 0
        for rows, data in cols:
            buf[rows] += data
        scores = buf[cand]
        for rows, _ in cols:
            buf[rows] = 0
        return scores
