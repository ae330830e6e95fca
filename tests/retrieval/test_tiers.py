"""Memory tiers: blocked flat search, IVF-SQ8 and OPQ+IVF-PQ with exact re-rank."""

import json

import faiss
import numpy as np
import pytest

from marag.config import ConfigError, RetrievalConfig, load_config
from marag.retrieval import open_index, open_retriever
from marag.retrieval.imported import compress_index, import_index
from marag.retrieval.manifest import BadIndexError
from marag.retrieval.tiers import default_nlist, default_pq_m, flat_search

pytestmark = pytest.mark.slow
N_SYNTH, DIM = 3000, 384


def test_blocked_flat_search_is_exact():
    rng = np.random.default_rng(0)
    xb = rng.standard_normal((1000, 32)).astype(np.float32)
    xq = rng.standard_normal((7, 32)).astype(np.float32)
    ref = faiss.IndexFlatIP(32)
    ref.add(xb)
    d_ref, i_ref = ref.search(xq, 10)
    d, i = flat_search(xb, xq, 10, "inner_product", block=96)  # last block: 40 rows
    np.testing.assert_array_equal(i, i_ref)
    np.testing.assert_allclose(d, d_ref, rtol=1e-5)
    d, i = flat_search(xb[:5], xq, 10, "inner_product", block=2)  # k above n
    assert i.shape == (7, 5) and sorted(i[0].tolist()) == [0, 1, 2, 3, 4]


def test_defaults():
    assert default_nlist(21_015_324) == 4096 and default_nlist(1_000_000) == 1024
    assert default_nlist(60) == 1
    assert default_pq_m(768) == 64 and default_pq_m(384) == 48


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory):
    """3,000 passages whose vectors lie in 60 clusters (real-looking neighbourhoods), a flat
    file of them, and queries drawn near random rows."""
    d = tmp_path_factory.mktemp("synth")
    rng = np.random.default_rng(1)
    centres = rng.standard_normal((60, DIM)).astype(np.float32)
    xb = centres[rng.integers(0, 60, N_SYNTH)] + 0.6 * rng.standard_normal((N_SYNTH, DIM))
    xb = (xb / np.linalg.norm(xb, axis=1, keepdims=True)).astype(np.float32)
    flat = faiss.IndexFlatIP(DIM)
    flat.add(xb)
    faiss.write_index(flat, str(d / "flat.index"))
    with open(d / "corpus.jsonl", "w") as f:
        f.writelines(json.dumps({"id": str(i), "contents": f'"T{i}"\npassage {i}'}) + "\n" for i in range(N_SYNTH))
    q = xb[rng.integers(0, N_SYNTH, 50)] + 0.05 * rng.standard_normal((50, DIM))
    q = (q / np.linalg.norm(q, axis=1, keepdims=True)).astype(np.float32)
    out = d / "idx"
    import_index(out, d / "corpus.jsonl", faiss_file=d / "flat.index", encoder="minilm")
    return out, q


def _recall(idx, truth, q, k=10):
    rows, _ = idx.search_vectors(q, k)
    return np.mean([len(set(r) & set(t)) / k for r, t in zip(rows.tolist(), truth.tolist(),
                                                             strict=True)])


def test_compressed_tiers_against_flat(synthetic):
    out, q = synthetic
    flat = open_index(out, tier="flat-mmap")
    truth, _ = flat.search_vectors(q, 10)
    rec = compress_index(out, "ivf-sq8", nlist=16)
    assert rec["spec"] == "IVF16,SQ8" and rec["cost"]["disk_bytes"] > N_SYNTH * DIM
    assert _recall(open_index(out, tier="ivf-sq8", nprobe=16), truth, q) >= 0.97
    rec = compress_index(out, "opq-ivfpq", nlist=16, pq_m=16, rerank=100)
    assert rec["spec"] == "OPQ16,IVF16,PQ16" and rec["params"]["rerank"] == 100
    m = json.loads((out / "manifest.json").read_text())
    assert m["default_tier"] == "opq-ivfpq" and set(m["tiers"]) == {"flat-mmap", "ivf-sq8",
                                                                     "opq-ivfpq"}
    codes = {t: (out / "tiers" / f"{t}.faiss.ivfdata").stat().st_size for t in m["tiers"]
             if t != "flat-mmap"}
    assert codes["opq-ivfpq"] < codes["ivf-sq8"] / 8  # 16 bytes a vector against 384
    plain = _recall(open_index(out, nprobe=16, rerank=0), truth, q)
    reranked = _recall(open_index(out, nprobe=16), truth, q)
    assert reranked >= 0.95 and reranked >= plain
    # the re-ranked scores are the exact ones
    idx = open_index(out, nprobe=16)
    rows, scores = idx.search_vectors(q[:3], 5)
    np.testing.assert_allclose(scores, np.einsum("qd,qkd->qk", q[:3], idx.vecs[rows]), atol=1e-5)
    # config keys reach the index; a tier never built is a clear error
    cfg = RetrievalConfig(index=str(out), kind="dense", tier="ivf-sq8", nprobe=4)
    r = open_retriever(cfg)
    assert r.tier == "ivf-sq8" and r.searcher.nprobe == 4


def test_fast_scan_tier_against_flat(synthetic):
    out, q = synthetic
    truth, _ = open_index(out, tier="flat-mmap").search_vectors(q, 10)
    rec = compress_index(out, "opq-ivfpq-fs", nlist=16, pq_m=32, rerank=100, make_default=False)
    assert rec["spec"] == "OPQ32,IVF16,PQ32x4fs" and rec["params"]["pq_bits"] == 4
    tier_file = out / "tiers" / "opq-ivfpq-fs.faiss"
    assert not tier_file.with_name(tier_file.name + ".ivfdata").exists()  # lists in the file
    assert rec["cost"]["disk_bytes"] == tier_file.stat().st_size
    # the OPQ rotation, the IVF centroids and PQ codebooks, then 16 bytes of codes and an
    # 8-byte id a vector (lists padded to blocks of 32)
    fixed = 4 * (DIM * DIM + 16 * DIM + 32 * 16 * (DIM // 32))
    assert rec["cost"]["disk_bytes"] < fixed + N_SYNTH * (16 + 8) + 16 * 32 * 24 + 4096
    plain = _recall(open_index(out, tier="opq-ivfpq-fs", nprobe=16, rerank=0), truth, q)
    idx = open_index(out, tier="opq-ivfpq-fs", nprobe=16)
    assert idx.searcher.rerank == 100
    reranked = _recall(idx, truth, q)
    assert reranked >= 0.95 and reranked >= plain
    rows, scores = idx.search_vectors(q[:3], 5)
    np.testing.assert_allclose(scores, np.einsum("qd,qkd->qk", q[:3], idx.vecs[rows]), atol=1e-5)
    with pytest.raises(ValueError, match="pq_m 7 must divide the dimension 384"):
        compress_index(out, "opq-ivfpq-fs", nlist=16, pq_m=7, make_default=False)


def test_tier_errors(synthetic, dense_index, tmp_path):
    out, _ = synthetic
    with pytest.raises(ValueError, match="unknown tier"):
        compress_index(out, "hnsw")
    small = tmp_path / "small"
    import shutil

    shutil.copytree(dense_index, small)
    with pytest.raises(ValueError, match="needs at least 256 vectors"):
        compress_index(small, "opq-ivfpq")
    with pytest.raises(BadIndexError, match="need a compressed index"):
        open_index(small, tier="opq-ivfpq")
    # a marag-built index gains tiers from its own embeddings.npy
    compress_index(small, "ivf-sq8")
    with pytest.raises(BadIndexError, match="tier 'opq-ivfpq' not built .*ivf-sq8"):
        open_index(small, tier="opq-ivfpq")
    assert open_index(small).search_batch(["first nobel prize in physics"], 1)[0].ids == [
        "nq_open-0"]
    with pytest.raises(ConfigError, match="tier"):
        load_config(None, ["retrieval.tier=hnsw"])
    with pytest.raises(ConfigError, match="milvus_uri"):
        load_config(None, ["retrieval.backend=milvus"])
    with pytest.raises(ConfigError, match="rerank"):
        load_config(None, ["retrieval.rerank=-1"])
