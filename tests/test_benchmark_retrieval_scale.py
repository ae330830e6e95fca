"""benchmarks/retrieval_scale.py's synthetic rows: a tier built from the generator (for a size
whose flat file would not fit the disk, ``gen --sparse`` + ``compress --synthetic``) is the
tier built from the flat file ``gen`` writes."""

from __future__ import annotations

import json

import numpy as np
import pytest

from test_benchmark_plan_scripts import load

pytestmark = pytest.mark.slow


def test_rows_are_the_same_whichever_way_they_are_asked_for(monkeypatch):
    scale = load("retrieval_scale")
    monkeypatch.setattr(scale, "GEN_BLOCK", 64)
    rows = scale.SyntheticRows(300, 16, seed=3)
    whole = np.concatenate([rows.block(a, min(300, a + 50)) for a in range(0, 300, 50)])
    assert whole.shape == (300, 16)
    np.testing.assert_allclose(np.linalg.norm(whole, axis=1), 1.0, rtol=1e-5)
    np.testing.assert_array_equal(rows.block(60, 200), whole[60:200])  # across blocks
    pick = np.array([299, 0, 64, 63, 128, 5, 64])
    np.testing.assert_array_equal(rows.take(pick), whole[pick])
    again = scale.SyntheticRows(300, 16, seed=3)
    np.testing.assert_array_equal(again.take(pick[::-1]), whole[pick[::-1]])
    assert not np.array_equal(scale.SyntheticRows(300, 16, seed=4).block(0, 10), whole[:10])


def test_a_tier_from_the_generator_is_the_tier_from_the_flat_file(tmp_path, monkeypatch):
    scale = load("retrieval_scale")
    monkeypatch.setattr(scale, "GEN_BLOCK", 256)
    real, hole = tmp_path / "real", tmp_path / "hole"
    scale.gen(real, 1200, 32)
    scale.gen(hole, 1200, 32, sparse=True)
    size = (real / "flat.index").stat().st_size
    assert (hole / "flat.index").stat().st_size == size == 45 + 1200 * 32 * 4
    assert json.loads((hole / "synthetic.json").read_text())["flat_rows_on_disk"] is False
    from marag.retrieval.vectors import read_faiss_flat

    on_disk = read_faiss_flat(real / "flat.index").open()
    np.testing.assert_array_equal(on_disk, scale.SyntheticRows.of(real).block(0, 1200))
    np.testing.assert_array_equal(scale.queries(real, 32, 20), scale.queries(hole, 32, 20))
    for w, synthetic in ((real, False), (hole, True)):
        scale.do_import(w)
        scale.compress(w, "ivf-sq8", 8, None, synthetic=synthetic)
    from marag.retrieval.tiered import TieredDenseIndex

    def search(w, tier, **kw):
        idx = TieredDenseIndex(w / "index", tier=tier, load_encoder=False, **kw)
        return idx.search_vectors(q, 5)[0]

    q = scale.queries(real, 32, 20)
    got = [search(w, "ivf-sq8", nprobe=8) for w in (real, hole)]
    np.testing.assert_array_equal(got[0], got[1])
    flat = search(real, "flat-mmap")
    assert np.mean([len(set(a) & set(b)) / 5 for a, b in zip(got[0], flat)]) >= 0.8
    with pytest.raises(ValueError, match="do not match"):
        from marag.retrieval.imported import compress_index

        compress_index(hole / "index", "ivf-sq8", nlist=8, rows=scale.SyntheticRows(1000, 32))
