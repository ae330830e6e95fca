"""Pruned BM25 top-k against scoring every passage: the same rows and bit-identical scores."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from marag.retrieval.bm25_topk import Postings, column_bounds, top_hits


def matrix(rng: np.random.Generator, n_docs: int, df: list[int], levels: int) -> Postings:
    """A CSC matrix with ascending rows per column; entries from a few levels, so ties."""
    rows, data, indptr = [], [], [0]
    for d in df:
        r = np.sort(rng.choice(n_docs, size=min(d, n_docs), replace=False))
        rows.append(r.astype(np.int32))
        vals = rng.integers(1, levels + 1, len(r)).astype(np.float32) * np.float32(0.37)
        data.append(vals)
        indptr.append(indptr[-1] + len(r))
    return Postings(np.concatenate(data) if data else np.empty(0, np.float32),
                    np.concatenate(rows) if rows else np.empty(0, np.int32),
                    np.asarray(indptr, np.int64), n_docs, small=0)


def plain(p: Postings, ids: list[int], k: int) -> tuple[np.ndarray, np.ndarray]:
    return top_hits(p.exhaustive(ids), k)


@settings(max_examples=300, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n_docs=st.integers(1, 300),
       df=st.lists(st.integers(0, 300), min_size=1, max_size=8),
       levels=st.sampled_from([1, 2, 5, 1000]), k=st.integers(1, 12), data=st.data())
def test_pruned_top_equals_scoring_everything(seed, n_docs, df, levels, k, data):
    p = matrix(np.random.default_rng(seed), n_docs, df, levels)
    ids = data.draw(st.lists(st.integers(0, len(df) - 1), max_size=10))  # repeats allowed
    rows, scores = p.top(ids, k)
    want_rows, want_scores = plain(p, ids, k)
    assert rows.tolist() == want_rows.tolist()
    assert scores.tobytes() == want_scores.tobytes()  # bit-identical


def test_a_rare_term_decides_and_the_common_list_is_pruned():
    rng = np.random.default_rng(0)
    n = 200_000
    # term 0: rare with a large idf; term 1: in every passage with a small contribution
    p = Postings(np.concatenate([np.full(50, 9.0, np.float32), np.full(n, 0.2, np.float32)]),
                 np.concatenate([np.sort(rng.choice(n, 50, replace=False)),
                                 np.arange(n)]).astype(np.int32),
                 np.array([0, 50, 50 + n], np.int64), n, small=0)
    want = plain(p, [1, 0], 5)
    rows, scores = p.top([1, 0], 5)
    assert rows.tolist() == want[0].tolist() and scores.tobytes() == want[1].tobytes()
    # only the rare column was added up; the common one was looked up for the 50 survivors
    assert p.visited() == 50 and not p._pool[0].any()
    # with a common term worth as much as the rare one nothing can be pruned
    data = p.data.copy()
    data[50:] = 9.0
    p = Postings(data, p.rows, p.indptr, n, small=0)
    want = plain(p, [0, 1], 5)
    rows, scores = p.top([0, 1], 5)
    assert rows.tolist() == want[0].tolist() and scores.tobytes() == want[1].tobytes()
    assert p.visited() == 50 + n and not p._pool[0].any()


@pytest.mark.parametrize("case", ["negative", "unsorted"])
def test_columns_pruning_cannot_trust_fall_back_to_scoring_everything(case):
    data = np.array([2.0, 1.0, 3.0, 0.5, 0.25], np.float32)
    rows = np.array([0, 2, 1, 0, 3], np.int32)
    if case == "negative":  # Robertson's idf is negative for terms in most passages
        data[3] = -0.5
    else:
        rows[:2] = [2, 0]
    p = Postings(data, rows, np.array([0, 2, 3, 5], np.int64), 4, small=0)
    assert p.bound(2 if case == "negative" else 0)[1] is False
    for ids in ([0, 1, 2], [2], [0, 0, 2]):
        got, want = p.top(ids, 2), plain(p, ids, 2)
        assert got[0].tolist() == want[0].tolist() and got[1].tobytes() == want[1].tobytes()


def test_no_terms_and_empty_columns_give_no_hits():
    p = Postings(np.array([1.0], np.float32), np.array([3], np.int32),
                 np.array([0, 0, 1], np.int64), 5, small=0)
    for ids in ([], [0], [0, 0]):
        rows, scores = p.top(ids, 3)
        assert rows.tolist() == [-1, -1, -1] and scores.tolist() == [0, 0, 0]
    assert p.top([1, 0], 3)[0].tolist() == [3, -1, -1]


def _same(p: Postings, ids: list[int], k: int) -> None:
    rows, scores = p.top(ids, k)
    want_rows, want_scores = plain(p, ids, k)
    assert rows.tolist() == want_rows.tolist() and scores.tobytes() == want_scores.tobytes()


def test_an_error_mid_search_leaves_the_scratch_array_clean():
    rng = np.random.default_rng(1)
    n = 1000
    p = Postings(np.concatenate([np.full(200, 9, np.float32), np.full(900, 0.1, np.float32),
                                 np.array([0.5], np.float32)]),
                 np.concatenate([np.arange(100, 300), np.arange(900), [950]]).astype(np.int32),
                 np.array([0, 200, 1100, 1101], np.int64), n, small=0)
    original = p.column
    for fail_at in range(1, 9):
        calls = {"n": 0}

        def column(t, calls=calls, fail_at=fail_at):
            calls["n"] += 1
            if calls["n"] == fail_at:
                raise KeyboardInterrupt("interrupted between two lists")
            return original(t)

        p.column = column  # type: ignore[method-assign]
        try:
            p.top([1, 0, 2], 20)
        except KeyboardInterrupt:
            pass
        p.column = original  # type: ignore[method-assign]
        assert all(not b.any() for b in p._pool)
        for ids in ([1], [2, 1], [1, 0, 2], list(rng.integers(0, 3, 5))):
            _same(p, [int(x) for x in ids], 3)


def test_rounding_of_a_long_query_cannot_drop_the_best_passage():
    # 16,385 float32 additions can round up by more than a fixed 1e-4 slack
    p = Postings(np.array([16395.64, 1.000489], np.float32), np.array([0, 1], np.int32),
                 np.array([0, 1, 2], np.int64), 2, small=0)
    _same(p, [0] + [1] * 16384, 1)


def test_infinite_entries_are_scored_the_plain_way():
    p = Postings(np.array([2e38, 3e38], np.float32), np.array([0, 1], np.int32),
                 np.array([0, 1, 2], np.int64), 2, small=0)
    assert p.bound(0)[1] is True and p.bound(1)[1] is True  # finite here
    with np.errstate(over="ignore"):
        _same(p, [0, 0, 1, 1], 1)  # the sums overflow: ties at inf go to the lower row
    q = Postings(np.array([np.inf, 1.0], np.float32), np.array([0, 1], np.int32),
                 np.array([0, 1, 2], np.int64), 2, small=0)
    assert q.bound(0)[1] is False


def test_lists_that_cannot_be_pruned_are_finished_the_plain_way():
    n = 32_000
    rng = np.random.default_rng(2)
    # four columns of similar worth over disjoint passages: no passage can outscore what
    # the lists not yet added could give someone else, so nothing is ever ruled out
    cols = [np.sort(part).astype(np.int32) for part in np.split(rng.permutation(n), 4)]
    vals = [rng.uniform(0.5, 1.0, 8000).astype(np.float32) for _ in range(4)]
    p = Postings(np.concatenate(vals), np.concatenate(cols),
                 np.array([0, 8000, 16000, 24000, 32000], np.int64), n, small=0)
    _same(p, [0, 1, 2, 3], 10)
    assert p.visited() == 32000
    small = Postings(p.data, p.rows, p.indptr, n, small=40_000)  # short lists: plain at once
    _same(small, [0, 1, 2, 3], 10)
    assert small.visited() == 32000 and small._pool == []


@settings(max_examples=200, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), df=st.lists(st.integers(0, 40), min_size=1, max_size=12),
       spoil=st.lists(st.sampled_from(["negative", "zero", "inf", "nan", "unsorted", "repeat"]),
                      max_size=3),
       chunk=st.sampled_from([1, 3, 7, 64, 1 << 24]))
def test_stored_bounds_are_the_ones_found_per_column(seed, df, spoil, chunk):
    rng = np.random.default_rng(seed)
    p = matrix(rng, 60, df, 5)
    data, rows = p.data.copy(), p.rows.copy()
    for kind in spoil:  # each spoils one entry of a random non-empty column
        full = [t for t in range(len(df)) if p.indptr[t + 1] > p.indptr[t]]
        if not full:
            break
        t = int(rng.choice(full))
        lo, hi = int(p.indptr[t]), int(p.indptr[t + 1])
        j = int(rng.integers(lo, hi))
        if kind in ("unsorted", "repeat"):
            if hi - lo < 2:
                continue
            j = max(j, lo + 1)
            rows[j] = rows[j - 1] if kind == "repeat" else rows[j - 1] - 1
        else:
            data[j] = {"negative": -1.0, "zero": 0.0, "inf": np.inf, "nan": np.nan}[kind]
    top, ok = column_bounds(data, rows, p.indptr, chunk=chunk)
    lazy = Postings(data, rows, p.indptr, 60, small=0)
    for t in range(len(df)):
        want_top, want_ok = lazy.bound(t)
        assert ok[t] == want_ok
        if want_ok or np.isfinite(want_top):
            assert float(top[t]) == want_top
        else:
            assert not np.isfinite(top[t])


@settings(max_examples=100, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), df=st.lists(st.integers(0, 300), min_size=1, max_size=8),
       k=st.integers(1, 12), data=st.data())
def test_search_with_stored_bounds_is_the_same_search(seed, df, k, data):
    p = matrix(np.random.default_rng(seed), 300, df, 5)
    stored = Postings(p.data, p.rows, p.indptr, 300, small=0,
                      bounds=column_bounds(p.data, p.rows, p.indptr, chunk=50))
    ids = data.draw(st.lists(st.integers(0, len(df) - 1), max_size=10))
    got, want = stored.top(ids, k), p.top(ids, k)
    assert got[0].tolist() == want[0].tolist() and got[1].tobytes() == want[1].tobytes()
    assert stored._bounds == {}  # nothing was read column by column


def test_bounds_keep_the_entries_precision():
    data = np.array([0.9398815210, 1e39, 2.0], np.float64)  # 1e39: beyond float32
    rows = np.array([0, 1, 0], np.int32)
    indptr = np.array([0, 2, 3], np.int32)
    top, ok = column_bounds(data, rows, indptr)
    lazy = Postings(data, rows, indptr, 2, small=0)
    assert top.dtype == np.float64
    assert [(float(a), bool(b)) for a, b in zip(top, ok, strict=True)] \
        == [lazy.bound(0), lazy.bound(1)] == [(1e39, True), (2.0, True)]
