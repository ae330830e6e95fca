import pytest

from marag.retrieval import open_index, rrf
from marag.retrieval.hybrid import HybridIndex, make_hybrid


def test_rrf_hand_checked_example():
    # k=60: a = 1/61 + 1/63, b = 1/62 + 1/61, c = 1/63, d = 1/62
    fused = rrf([["a", "b", "c"], ["b", "d", "a"]], k=60)
    assert [d for d, _ in fused] == ["b", "a", "d", "c"]
    scores = dict(fused)
    assert scores["a"] == pytest.approx(1 / 61 + 1 / 63)
    assert scores["b"] == pytest.approx(1 / 62 + 1 / 61)
    assert scores["c"] == pytest.approx(1 / 63)
    assert scores["d"] == pytest.approx(1 / 62)


def test_rrf_weights_ties_and_errors():
    fused = rrf([["x", "y"], ["y", "x"]], k=1, weights=[2.0, 1.0])
    assert fused == [("x", pytest.approx(2 / 2 + 1 / 3)), ("y", pytest.approx(2 / 3 + 1 / 2))]
    # equal scores keep first-seen order
    assert [d for d, _ in rrf([["p"], ["q"]])] == ["p", "q"]
    assert rrf([]) == [] and rrf([[]]) == []
    with pytest.raises(ValueError, match="2 weights for 1 rankings"):
        rrf([["a"]], weights=[1.0, 2.0])


@pytest.mark.slow
def test_hybrid_fuses_its_parts(bm25_index, dense_index, nq_queries, tmp_path):
    out = make_hybrid(tmp_path / "hybrid", bm25_index, dense_index, depth=20)
    idx = open_index(out)
    assert isinstance(idx, HybridIndex) and len(idx) == 60
    hits = idx.search_batch(nq_queries, 5)
    bm25 = open_index(bm25_index).search_batch(nq_queries, 20)
    dense = open_index(dense_index).search_batch(nq_queries, 20)
    for h, b, d in zip(hits, bm25, dense, strict=True):
        expected = rrf([b.ids, d.ids], k=60)[:5]
        assert h.ids == [i for i, _ in expected]
        assert h.scores == pytest.approx([s for _, s in expected])
        assert all(p.text for p in h.passages)
    assert hits[0].ids[0] == "nq_open-0"


@pytest.mark.slow
def test_hybrid_refuses_mismatched_parts(bm25_index, dense_index, tmp_path):
    with pytest.raises(Exception, match="expected a bm25 index"):
        make_hybrid(tmp_path / "h", dense_index, bm25_index)
