"""Pruned BM25 top-k against scoring every passage: the same rows and bit-identical scores."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from marag.retrieval.bm25_topk import Postings, top_hits


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
                    np.asarray(indptr, np.int64), n_docs)


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
                 np.array([0, 50, 50 + n], np.int64), n)
    want = plain(p, [1, 0], 5)
    rows, scores = p.top([1, 0], 5)
    assert rows.tolist() == want[0].tolist() and scores.tobytes() == want[1].tobytes()
    # only the rare column was added up; the common one was looked up for the 50 survivors
    assert p.visited() == 50 and not p._buffer().any()
    # with a common term worth as much as the rare one nothing can be pruned
    data = p.data.copy()
    data[50:] = 9.0
    p = Postings(data, p.rows, p.indptr, n)
    want = plain(p, [0, 1], 5)
    rows, scores = p.top([0, 1], 5)
    assert rows.tolist() == want[0].tolist() and scores.tobytes() == want[1].tobytes()
    assert p.visited() == 50 + n and not p._buffer().any()


@pytest.mark.parametrize("case", ["negative", "unsorted"])
def test_columns_pruning_cannot_trust_fall_back_to_scoring_everything(case):
    data = np.array([2.0, 1.0, 3.0, 0.5, 0.25], np.float32)
    rows = np.array([0, 2, 1, 0, 3], np.int32)
    if case == "negative":  # Robertson's idf is negative for terms in most passages
        data[3] = -0.5
    else:
        rows[:2] = [2, 0]
    p = Postings(data, rows, np.array([0, 2, 3, 5], np.int64), 4)
    assert p.bound(2 if case == "negative" else 0)[1] is False
    for ids in ([0, 1, 2], [2], [0, 0, 2]):
        got, want = p.top(ids, 2), plain(p, ids, 2)
        assert got[0].tolist() == want[0].tolist() and got[1].tobytes() == want[1].tobytes()


def test_no_terms_and_empty_columns_give_no_hits():
    p = Postings(np.array([1.0], np.float32), np.array([3], np.int32),
                 np.array([0, 0, 1], np.int64), 5)
    for ids in ([], [0], [0, 0]):
        rows, scores = p.top(ids, 3)
        assert rows.tolist() == [-1, -1, -1] and scores.tolist() == [0, 0, 0]
    assert p.top([1, 0], 3)[0].tolist() == [3, -1, -1]
