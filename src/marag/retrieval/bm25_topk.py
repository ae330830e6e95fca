"""Exact BM25 top-k without scoring every passage (MaxScore-style pruning).

The plain way (``Postings.exhaustive``) adds every query term's whole posting list into a
score array as long as the corpus and then selects among the passages that scored: both are
linear in the corpus or worse (measured: 5.5-7.4 ms a query at 1M passages, 31-36 ms at
4M; BENCHMARKS.md). Most of that time goes to the long lists of common, low-idf terms, which
rarely decide the top-k.

``Postings.top`` visits terms from the largest possible contribution (the maximum of the
term's column) down. Once the k-th best partial score among the passages seen so far
exceeds what all unvisited terms together could add, no unseen passage can reach the
top-k, so the long lists are never added up. The passages still in reach are narrowed term
by term (each remaining list looked up for them, the threshold taken again), then get their
exact scores from every query term's list (a binary search per passage in a long list, a
scatter through the scratch array in a short one), added in the query's token order in
float32, the same additions as the plain way: scores are bit-identical and ties are ordered the same
(lower row first). Bounds are compared with a slack that grows with the query's length, so
rounding can only make the pruning more cautious, never drop a passage of the top-k.

The scratch array (one float32 per passage) is all zeros between queries, and while a query
runs zero means "not seen yet", which is why pruning needs every entry of the query's
columns positive (BM25's Lucene variant; Robertson's idf can be negative) and finite, and
each column's rows ascending (marag's builder writes them so). A query whose columns do not
qualify or whose lists are short (a small corpus) is scored the plain way, and so is one
that would have to add up more than a quarter of its entries before the rest can be ruled
out (checked as it goes), so a query that cannot be pruned costs at most ~1.25x the plain
way.
"""

from __future__ import annotations

import math
import threading

import numpy as np

MARGIN = 1e-4        # relative slack on bounds, plus 2^-23 per added term (rounding)
SMALL = 20_000       # posting entries below which scoring everything is cheaper
GIVE_UP = 0.25       # most of the entries a pruned search may add up before giving up
FLOAT32_LIMIT = float(np.finfo(np.float32).max) / 2


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


def column_bounds(data: np.ndarray, rows: np.ndarray, indptr: np.ndarray,
                  chunk: int = 1 << 24) -> tuple[np.ndarray, np.ndarray]:
    """Every column's largest entry (0 for an empty column) and whether pruning may use the
    column (every entry positive and finite, rows ascending), as ``Postings.bound`` finds
    them one column at a time: one pass over the matrix, about ``chunk`` entries at a time,
    so a memory-mapped matrix is streamed through, never copied whole into private memory
    (its pages are read once, as file pages). The maxima keep the entries' own precision."""
    n = len(indptr) - 1
    top = np.zeros(n, dtype=np.result_type(data.dtype, np.float32))
    ok = np.ones(n, dtype=bool)
    c = 0
    while c < n:
        lo = int(indptr[c])
        e = min(max(int(np.searchsorted(indptr, lo + chunk, side="right")) - 1, c + 1), n)
        hi = int(indptr[e])
        if hi > lo:
            d = np.asarray(data[lo:hi])
            r = np.asarray(rows[lo:hi])
            ptr = np.asarray(indptr[c:e + 1], dtype=np.int64)
            full = ptr[1:] > ptr[:-1]
            starts = ptr[:-1][full] - lo  # ascending: empty columns hold no entries
            cols = np.arange(c, e)[full]
            top[cols] = np.maximum.reduceat(d, starts)
            low = np.minimum.reduceat(d, starts)
            unordered = np.zeros(hi - lo, dtype=bool)
            unordered[1:] = r[1:] <= r[:-1]
            unordered[starts] = False  # a column's first row follows another column's
            ok[cols] = (low > 0) & np.isfinite(top[cols]) \
                & ~np.logical_or.reduceat(unordered, starts)
        c = e
    return top, ok


class Postings:
    """A BM25 score matrix in CSC form (bm25s's ``data``/``indices``/``indptr``), searched
    for the exact top-k. Thread-safe: scratch arrays come from a pool (one per search in
    flight, kept for reuse); bounds are the stored ones (``column_bounds``) or, without them,
    found per term and cached (a race computes one twice)."""

    def __init__(self, data: np.ndarray, rows: np.ndarray, indptr: np.ndarray,
                 num_docs: int, small: int = SMALL,
                 bounds: tuple[np.ndarray, np.ndarray] | None = None) -> None:
        self.data, self.rows, self.indptr, self.num_docs = data, rows, indptr, num_docs
        self.small = small
        # every column's (max, prunable), from column_bounds at build time: without them a
        # term's first search reads its whole column (every page of it) to find its maximum
        self.stored_bounds = bounds
        self._bounds: dict[int, tuple[float, bool]] = {}  # term -> (max, prunable)
        self._pool: list[np.ndarray] = []
        self._pool_lock = threading.Lock()
        self._local = threading.local()

    def column(self, t: int) -> tuple[np.ndarray, np.ndarray]:
        lo, hi = self.indptr[t], self.indptr[t + 1]
        return self.rows[lo:hi], self.data[lo:hi]

    def bound(self, t: int) -> tuple[float, bool]:
        """The column's largest entry, and whether pruning may use it (every entry positive
        and finite, rows ascending): stored, or computed on the term's first use (which reads
        its whole column)."""
        if self.stored_bounds is not None:
            return float(self.stored_bounds[0][t]), bool(self.stored_bounds[1][t])
        hit = self._bounds.get(t)
        if hit is None:
            rows, data = self.column(t)
            if len(data) == 0:
                hit = (0.0, True)
            else:
                top = float(data.max())
                ok = (bool(data.min() > 0) and math.isfinite(top)
                      and bool(np.all(rows[1:] > rows[:-1])))
                hit = (top, ok)
            self._bounds[t] = hit
        return hit

    def visited(self) -> int:
        """Posting entries this thread's last ``top`` added up in full (the lists it only
        looked candidates up in are not counted)."""
        return int(getattr(self._local, "visited", 0))

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

    def top(self, token_ids: list[int], k: int) -> tuple[np.ndarray, np.ndarray]:
        """Rows and scores of the ``k`` best passages (as ``top_hits(exhaustive(ids), k)``)."""
        self._local.visited = 0
        if k <= 0:
            return np.empty(0, np.int64), np.empty(0, np.float32)
        terms = sorted(set(token_ids))
        total = sum(int(self.indptr[t + 1] - self.indptr[t]) for t in token_ids)
        bounds = {t: self.bound(t) for t in terms}
        ceiling = sum(bounds[t][0] for t in token_ids)  # the most any passage can score
        if total < self.small or not all(ok for _, ok in bounds.values()) \
                or not ceiling < FLOAT32_LIMIT:  # float32 sums that may overflow: plain way
            self._local.visited = total
            return top_hits(self.exhaustive(token_ids), k)
        with self._pool_lock:
            buf = self._pool.pop() if self._pool else None
        if buf is None:
            buf = np.zeros(self.num_docs, dtype=np.float32)
        try:
            return self._pruned(token_ids, k, terms, bounds, total, buf)
        finally:
            with self._pool_lock:
                self._pool.append(buf)  # all zeros again (the finally blocks below)

    def _pruned(self, token_ids: list[int], k: int, terms: list[int],
                bounds: dict[int, tuple[float, bool]], total: int, buf: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray]:
        times = {t: token_ids.count(t) for t in terms}  # a repeated token adds its column again
        # visit terms from the largest possible contribution down (ties: lower id first)
        visit = sorted(terms, key=lambda t: (-bounds[t][0] * times[t], t))
        left = [0.0] * (len(visit) + 1)  # what the terms from i on could still add
        for i in range(len(visit) - 1, -1, -1):
            left[i] = left[i + 1] + bounds[visit[i]][0] * times[visit[i]]
        slack = MARGIN + len(token_ids) * 2.0**-23
        seen: list[np.ndarray] = []  # rows with a nonzero entry in buf, in pieces
        best = np.empty(0, np.int64)  # the k best partials so far (fewer while fewer seen)
        visited = 0
        try:
            for i, t in enumerate(visit):
                rows, data = self.column(t)
                if visited + len(rows) > GIVE_UP * total:
                    break  # pruning has not paid off in time: the plain way is cheaper
                seen.append(rows[buf[rows] == 0])  # entries are positive: 0 = not seen yet
                buf[rows] += data * np.float32(times[t])
                visited += len(rows)
                best = self._best(best, rows, buf, k)
                if len(best) < k:
                    continue
                kth = float(buf[best].min())
                rest = left[i + 1] * (1 + slack)
                if rest < kth * (1 - slack):
                    # unseen passages score at most `rest` < kth: out of reach. Seen ones
                    # too unless their partial plus `rest` could reach kth.
                    cand = np.concatenate(seen)
                    partial = buf[cand].astype(np.float64)
                    reach = partial + rest >= kth * (1 - slack)
                    keep, part = cand[reach], partial[reach]
                    self._clear(buf, seen)
                    self._local.visited = visited
                    keep = self._narrow(keep, part, visit[i + 1:], times, left[i + 1:],
                                        slack, k, buf)
                    return top_hits(self._exact(keep, token_ids, buf), k, rows=keep)
        finally:
            self._clear(buf, seen)
        self._local.visited = total
        return top_hits(self.exhaustive(token_ids), k)

    @staticmethod
    def _best(best: np.ndarray, rows: np.ndarray, buf: np.ndarray, k: int) -> np.ndarray:
        """The k best partials after column ``rows`` was added: only the previous best and
        the column's rows can be among them (every other partial is unchanged and was
        already below the previous best)."""
        if len(best) and len(rows):
            pos = np.minimum(np.searchsorted(rows, best), len(rows) - 1)
            pool = np.concatenate([rows, best[rows[pos] != best]])
        else:
            pool = np.concatenate([rows, best])
        if len(pool) <= k:
            return pool
        vals = buf[pool]
        return pool[np.argpartition(vals, len(vals) - k)[len(vals) - k:]]

    @staticmethod
    def _clear(buf: np.ndarray, seen: list[np.ndarray]) -> None:
        for s in seen:
            buf[s] = 0
        seen.clear()

    def _narrow(self, keep: np.ndarray, part: np.ndarray, rest_terms: list[int],
                times: dict[int, int], left: list[float], slack: float, k: int,
                buf: np.ndarray) -> np.ndarray:
        """The passages of ``keep`` (partial scores ``part``) still in reach of the top-k
        once the terms not added up are looked up one by one, largest first: each adds
        its entries to the partials and shrinks what the rest could add (``left[j + 1]``),
        so the threshold rules more passages out each time."""
        for j, t in enumerate(rest_terms):
            if len(keep) <= k:
                break
            part = part + self._lookup(t, keep, buf).astype(np.float64) * times[t]
            rest = left[j + 1] * (1 + slack)
            kth = float(np.partition(part, len(part) - k)[len(part) - k])
            reach = part + rest >= kth * (1 - slack)
            keep, part = keep[reach], part[reach]
        return keep

    def _lookup(self, t: int, cand: np.ndarray, buf: np.ndarray) -> np.ndarray:
        """Column ``t``'s entries at the rows ``cand`` (no repeats, any order), 0 where it
        has none: a binary search per candidate, or the column scattered into ``buf`` (all
        zeros) and read at the candidates, whichever reads less."""
        rows, data = self.column(t)
        if len(rows) == 0 or len(cand) == 0:
            return np.zeros(len(cand), dtype=np.float32)
        if len(cand) * max(math.log2(len(rows)), 1.0) < len(rows):
            out = np.zeros(len(cand), dtype=np.float32)
            pos = np.searchsorted(rows, cand)
            found = pos < len(rows)
            found[found] = rows[pos[found]] == cand[found]
            out[found] = data[pos[found]]
            return out
        try:
            buf[rows] = data
            return buf[cand]
        finally:
            buf[rows] = 0

    def _exact(self, cand: np.ndarray, token_ids: list[int], buf: np.ndarray) -> np.ndarray:
        """Exact scores of the rows ``cand``: the float32 additions of ``exhaustive`` in its
        order (a candidate not in a column adds +0.0, which changes nothing)."""
        scores = np.zeros(len(cand), dtype=np.float32)
        for t in token_ids:
            scores += self._lookup(t, cand, buf)
        return scores
