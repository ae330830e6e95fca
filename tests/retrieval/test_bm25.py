import os
import shutil

import numpy as np
import pytest

from marag.corpus import iter_corpus
from marag.retrieval import BadIndexError, build_index, open_index
from marag.retrieval.bm25 import BM25Index, tokenize_queries


def test_scores_identical_to_raw_bm25s(bm25_index, nq_queries):
    import bm25s
    import Stemmer

    ours = open_index(bm25_index)
    hits = ours.search_batch(nq_queries, k=10)
    raw = bm25s.BM25.load(str(bm25_index / "bm25s"), mmap=True)
    tokens = bm25s.tokenize(nq_queries, stopwords="en", stemmer=Stemmer.Stemmer("english"),
                            return_ids=False, show_progress=False)
    rows, scores = raw.retrieve(tokens, k=10, show_progress=False)
    corpus = list(iter_corpus(ours.manifest["corpus"]["path"]))
    for h, r, s in zip(hits, rows, scores, strict=True):
        # bm25s pads a short list with zero-score passages; marag returns only real hits
        r, s = r[s > 0], s[s > 0]
        assert h.scores == [float(x) for x in s]  # bit-identical, not approximately equal
        # the same passages at each score; bm25s leaves tied ones in whatever order its
        # partition gives, marag in corpus order
        row_of = {p.id: i for i, p in enumerate(corpus)}
        got = [(sc, row_of[i]) for sc, i in zip(h.scores, h.ids, strict=True)]
        assert sorted(got, key=lambda x: (-x[0], x[1])) == got
        cut = s[-1]  # a tie at the cut may pick different passages of that score
        assert sorted((float(a), int(b)) for a, b in zip(s, r, strict=True) if a > cut) == sorted(
            x for x in got if x[0] > cut)
        assert h.passages == [corpus[row_of[i]] for i in h.ids]
        assert h.scores == sorted(h.scores, reverse=True)
    # the gold passage of the first question is nq_open-0 (Nobel prize in physics)
    assert hits[0].ids[0] == "nq_open-0"


def test_index_equals_bm25s_own_indexing(bm25_index, nq_corpus):
    """The streaming builder writes exactly the matrix bm25s.BM25.index would."""
    import bm25s
    import Stemmer
    from bm25s.tokenization import Tokenizer

    tok = Tokenizer(stopwords="en", stemmer=Stemmer.Stemmer("english"))
    texts = [f"{p.title}\n{p.text}" for p in iter_corpus(nq_corpus)]
    ids = tok.tokenize(texts, update_vocab=True, show_progress=False)
    ref = bm25s.BM25()
    ref.index((ids, tok.get_vocab_dict()), show_progress=False)
    ours = bm25s.BM25.load(str(bm25_index / "bm25s"))
    assert ours.vocab_dict == ref.vocab_dict
    for key in ("data", "indices", "indptr"):
        assert np.array_equal(ours.scores[key], ref.scores[key]), key
        assert ours.scores[key].dtype == ref.scores[key].dtype


def test_small_batches_give_the_same_index(bm25_index, nq_corpus, tmp_path):
    other = build_index(nq_corpus, tmp_path / "b", batch_size=7, show_progress=False)
    for name in ("data.csc.index.npy", "indices.csc.index.npy", "indptr.csc.index.npy"):
        assert np.array_equal(np.load(bm25_index / "bm25s" / name), np.load(other / "bm25s" / name))


def test_manifest_and_edge_queries(bm25_index):
    idx = open_index(bm25_index)
    assert isinstance(idx, BM25Index)
    m = idx.manifest
    assert m["kind"] == "bm25" and m["count"] == 60 and m["corpus"]["kind"] == "sha256"
    assert m["params"]["k1"] == 1.5 and m["marag_version"]
    # only passages sharing a term with the query are hits, however large k is
    [big] = idx.search_batch(["nobel prize"], k=1000)
    passages = idx.store.get_many(range(len(idx)))
    tokens = tokenize_queries([f"{p.title}\n{p.text}" for p in passages], idx.stemmer())
    matching = {p.id for p, t in zip(passages, tokens) if {"nobel", "prize"} & set(t)}
    assert 0 < len(matching) < 60
    assert set(big.ids) == matching and len(big.ids) == len(matching)
    assert all(s > 0 for s in big.scores) and big.scores == sorted(big.scores, reverse=True)
    # no matching term: no passages (no zero-score filler)
    odd = idx.search_batch(["", "zzzqqq unknownword", "the of and"], k=3)
    assert all(h.passages == [] and h.scores == [] for h in odd)
    rows, _ = idx.search_rows(["zzzqqq", "nobel prize"], k=4)
    assert rows[0].tolist() == [-1] * 4 and (rows[1] >= 0).sum() == min(4, len(matching))
    assert idx.search_batch([], k=3) == []


async def test_async_search(bm25_index):
    idx = open_index(bm25_index)
    hits = await idx.search(["first nobel prize in physics"], 2)
    assert hits[0].ids[0] == "nq_open-0"


def test_open_errors(bm25_index, nq_corpus, tmp_path):
    with pytest.raises(BadIndexError, match="index directory not found"):
        open_index(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(BadIndexError, match="no manifest.json"):
        open_index(tmp_path / "empty")
    # a changed corpus is refused; a deleted one is fine (text lives in the index's store)
    corpus = tmp_path / "c.jsonl"
    shutil.copy(nq_corpus, corpus)
    idx = build_index(corpus, tmp_path / "i", show_progress=False)
    corpus.write_text(corpus.read_text().replace("Nobel", "Nobal"))
    with pytest.raises(BadIndexError, match="changed since the index was built"):
        open_index(idx)
    corpus.unlink()
    assert open_index(idx).search_batch(["physics nobel"], 1)[0].passages


def test_failed_rebuild_does_not_look_finished(nq_corpus, tmp_path):
    out = build_index(nq_corpus, tmp_path / "i", show_progress=False)
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "a", "text": "x"}\n{"id": "a", "text": "y"}\n')
    with pytest.raises(ValueError, match="duplicate passage id 'a' on lines 1 and 2"):
        build_index(bad, out, show_progress=False)
    with pytest.raises(BadIndexError, match="no manifest.json"):
        open_index(out)


def test_build_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="corpus file not found"):
        build_index(tmp_path / "none.jsonl", tmp_path / "x", show_progress=False)
    (tmp_path / "empty.jsonl").write_text("")
    with pytest.raises(ValueError, match="corpus has no passages"):
        build_index(tmp_path / "empty.jsonl", tmp_path / "x", show_progress=False)
    with pytest.raises(ValueError, match="unknown index kind"):
        build_index(tmp_path / "none.jsonl", tmp_path / "x", kind="splade")


def test_concurrent_searches_match_sequential(bm25_index, nq_queries):
    from concurrent.futures import ThreadPoolExecutor

    idx = open_index(bm25_index)
    expected = [idx.search_batch([q], 5)[0] for q in nq_queries]
    with ThreadPoolExecutor(4) as pool:
        got = list(pool.map(lambda q: idx.search_batch([q], 5)[0], nq_queries * 3))
    assert got == expected * 3


def test_pruned_search_equals_scoring_every_passage(bm25_index, nq_queries):
    from marag.retrieval.bm25_topk import top_hits

    idx = open_index(bm25_index)
    idx.postings.small = 0  # a fixture this small is otherwise scored the plain way
    vocab = idx.model.vocab_dict
    pruned = 0
    for tokens in tokenize_queries(nq_queries + ["the the film film of"], idx.stemmer()):
        ids = [vocab[t] for t in tokens if t in vocab]
        full = sum(len(idx.postings.column(t)[0]) for t in set(ids))
        for k in (1, 3, 5, 10, 50):
            rows, scores = idx.postings.top(ids, k)
            want_rows, want_scores = top_hits(idx.postings.exhaustive(ids), k)
            assert rows.tolist() == want_rows.tolist()
            assert scores.tobytes() == want_scores.tobytes()
            pruned += idx.postings.visited() < full
    assert pruned > 0  # the real queries do take the pruned path


def test_bounds_are_stored_by_the_build_and_used(bm25_index, nq_queries, tmp_path, caplog):
    from marag.retrieval.bm25 import BOUNDS_FILE
    from marag.retrieval.bm25_topk import column_bounds

    idx = open_index(bm25_index)
    assert (bm25_index / BOUNDS_FILE).is_file() and idx.postings.stored_bounds is not None
    p = idx.postings
    top, ok = column_bounds(p.data, p.rows, p.indptr, chunk=97)
    assert p.stored_bounds[0].tobytes() == top.tobytes()
    assert p.stored_bounds[1].tolist() == ok.tolist()
    p.small = 0
    with_bounds = idx.search_batch(nq_queries, 5)
    assert p._bounds == {}  # no posting list was read to find a bound
    # an index without the file (built before marag stored them) finds them per term
    old = tmp_path / "old"
    shutil.copytree(bm25_index, old)
    (old / BOUNDS_FILE).unlink()
    lazy = open_index(old)
    lazy.postings.small = 0
    assert lazy.postings.stored_bounds is None
    assert lazy.search_batch(nq_queries, 5) == with_bounds and lazy.postings._bounds
    # a file that does not fit, is damaged, or was computed from another matrix is ignored,
    # and said so: a wrong bound would drop real results
    good = (bm25_index / BOUNDS_FILE).read_bytes()
    for damage, needle in [(b"", "unreadable"), (b"not a zip", "unreadable"),
                           (good[: len(good) // 2], "unreadable")]:
        (old / BOUNDS_FILE).write_bytes(damage)
        caplog.clear()
        with caplog.at_level("WARNING"):
            reopened = open_index(old)
        assert reopened.postings.stored_bounds is None and needle in caplog.text
        assert reopened.search_batch(nq_queries[:2], 5) == with_bounds[:2]
    # a copy of the index (new modification times) keeps its bounds: the same matrix
    (old / BOUNDS_FILE).write_bytes(good)
    for f in (old / "bm25s").iterdir():
        os.utime(f, (0, 0))
    assert open_index(old).postings.stored_bounds is not None
    # an older marag rebuilding the folder leaves the file of the matrix before it
    stale = tmp_path / "stale"
    shutil.copytree(bm25_index, stale)
    np.save(stale / "bm25s" / "data.csc.index.npy",
            np.load(stale / "bm25s" / "data.csc.index.npy") * np.float32(0.5))
    caplog.clear()
    with caplog.at_level("WARNING"):
        assert open_index(stale).postings.stored_bounds is None
    assert "computed from another score matrix" in caplog.text


def _mapped_kib(name: str) -> int:
    """Resident KiB of this process's mappings of files called ``name`` (/proc/self/smaps)."""
    total, inside = 0, False
    with open("/proc/self/smaps") as f:
        for line in f:
            head = line.split()
            if len(head) >= 5 and "-" in head[0] and ":" in head[3]:  # a mapping's first line
                inside = line.rstrip().endswith(name)
            elif inside and line.startswith("Rss:"):
                total += int(head[1])
    return total


def test_matrix_pages_are_handed_back_every_release_every_queries(bm25_index, nq_queries):
    idx = open_index(bm25_index)
    want = idx.search_batch(nq_queries, 5)
    idx.release_pages()
    assert _mapped_kib("data.csc.index.npy") == 0
    idx.release_every = 0  # kept: the pages a search read stay mapped
    assert idx.search_batch(nq_queries, 5) == want
    assert _mapped_kib("data.csc.index.npy") > 0
    idx.release_every = len(nq_queries)  # handed back after the batch's last query
    idx._since_release = 0
    assert idx.search_batch(nq_queries, 5) == want
    assert _mapped_kib("data.csc.index.npy") == 0
    idx.release_every = 1  # every query: the same answers
    assert idx.search_batch(nq_queries, 5) == want
