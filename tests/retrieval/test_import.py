"""``marag index import``: Search-R1/FlashRAG layouts referenced in place, checked, verified."""

import gzip
import json

import faiss
import numpy as np
import pytest

from marag.cli import main
from marag.retrieval import open_index
from marag.retrieval.bm25_topk import Postings
from marag.retrieval.imported import ImportError_, import_index, verify_index
from marag.retrieval.manifest import BadIndexError
from marag.retrieval.tiered import TieredDenseIndex

pytestmark = pytest.mark.slow


def _ids(hits):
    return [h.ids for h in hits]


@pytest.mark.parametrize("corpus", ["corpus", "gz", "tar"])
def test_import_flat_index_answers_like_the_built_one(wiki18_layout, dense_index, nq_queries,
                                                      tmp_path, corpus):
    out = tmp_path / "imp"
    report = import_index(out, wiki18_layout[corpus], faiss_file=wiki18_layout["faiss"],
                          encoder="minilm")
    assert report["passages"] == 60
    # the vectors are referenced where they are, never copied or linked into the index
    m = json.loads((out / "manifest.json").read_text())
    assert m["vectors"]["path"] == str(wiki18_layout["faiss"].resolve())
    assert m["vectors"]["offset"] == 45 and m["vectors"]["rows"] == 60
    assert not any(p.suffix == ".index" for p in out.rglob("*"))
    if corpus == "corpus":  # a plain corpus is read in place: only the offsets are written
        assert report["unpacked_corpus_bytes"] == 0
        assert report["disk_bytes"] < 8 * 61 + 10_000
    else:  # gzip and tar cannot be read at an offset: unpacked once, and said so
        assert report["unpacked_corpus_bytes"] == wiki18_layout["corpus"].stat().st_size
    assert m["query_encoder"] == {"name": "all-MiniLM-L6-v2", "query_prefix": "",
                                  "passage_prefix": "", "pooling": "mean", "normalize": True,
                                  "metric": "inner_product", "dim": 384}
    imported = open_index(out)
    assert isinstance(imported, TieredDenseIndex) and imported.tier == "flat-mmap"
    built = open_index(dense_index)
    a, b = imported.search_batch(nq_queries, 5), built.search_batch(nq_queries, 5)
    # ids differ in name only (line numbers here, nq_open-N there): compare rows and scores
    assert [[int(i) for i in ids] for ids in _ids(a)] == [
        [int(i.split("-")[1]) for i in ids] for ids in _ids(b)]
    np.testing.assert_allclose([h.scores for h in a], [h.scores for h in b], atol=1e-5)
    assert a[0].passages[0].title == b[0].passages[0].title
    assert verify_index(out)["ok"]


def test_e5_settings_are_recorded_and_checked(wiki18_layout, tmp_path):
    out = tmp_path / "e5"
    import_index(out, wiki18_layout["corpus"], faiss_file=wiki18_layout["faiss"],
                 encoder="minilm", query_prefix="query: ", passage_prefix="passage: ",
                 pooling="mean")
    m = json.loads((out / "manifest.json").read_text())
    assert m["query_encoder"]["query_prefix"] == "query: "
    assert m["query_encoder"]["pooling"] == "mean"
    # the vectors were made without the prefix, which verify catches
    report = verify_index(out, sample=8)
    assert report["ok"] is False or report["min_cosine"] < 0.999
    with pytest.raises(ImportError_, match="mean pooling .*pools by mean|pooling"):
        import_index(tmp_path / "cls", wiki18_layout["corpus"],
                     faiss_file=wiki18_layout["faiss"], encoder="minilm", pooling="cls")
    # a manifest whose pooling the encoder does not do is refused when opened
    m["query_encoder"]["pooling"] = "cls"
    (out / "manifest.json").write_text(json.dumps(m))
    with pytest.raises(BadIndexError, match="cls pooling but encoder .* pools by mean"):
        open_index(out)


def test_mismatches_are_clear_errors(wiki18_layout, tmp_path):
    corpus, flat = wiki18_layout["corpus"], wiki18_layout["faiss"]
    lines = corpus.read_text().splitlines(keepends=True)
    short = tmp_path / "short.jsonl"
    short.write_text("".join(lines[:59]))
    with pytest.raises(ImportError_, match="60 vectors but .* 59 passages"):
        import_index(tmp_path / "a", short, faiss_file=flat, encoder="minilm")
    swapped = tmp_path / "swapped.jsonl"
    swapped.write_text("".join([lines[1], lines[0], *lines[2:]]))
    with pytest.raises(ImportError_, match="line 1 has id '1'|line 2 has id '0'"):
        import_index(tmp_path / "b", swapped, faiss_file=flat, encoder="minilm")
    broken = tmp_path / "broken.jsonl"
    broken.write_text("".join(lines[:3]) + '{"id": "3", "contents": \n' + "".join(lines[4:]))
    with pytest.raises(ValueError, match=f"{broken}:4: invalid JSON"):
        import_index(tmp_path / "c", broken, faiss_file=flat, encoder="minilm")
    wide = faiss.IndexFlatIP(768)
    wide.add(np.random.default_rng(0).standard_normal((60, 768)).astype(np.float32))
    faiss.write_index(wide, str(tmp_path / "wide.index"))
    with pytest.raises(ImportError_, match="384-dim vectors but the index holds 768-dim"):
        import_index(tmp_path / "d", corpus, faiss_file=tmp_path / "wide.index", encoder="minilm")
    ivf = faiss.index_factory(384, "IVF1,Flat", faiss.METRIC_INNER_PRODUCT)
    faiss.write_index(ivf, str(tmp_path / "ivf.index"))
    with pytest.raises(ValueError, match="not a faiss flat index"):
        import_index(tmp_path / "e", corpus, faiss_file=tmp_path / "ivf.index", encoder="minilm")
    cut = tmp_path / "cut.index"
    cut.write_bytes(flat.read_bytes()[:-100])
    with pytest.raises(ValueError, match="truncated copy"):
        import_index(tmp_path / "f", corpus, faiss_file=cut, encoder="minilm")
    with pytest.raises(FileNotFoundError):
        import_index(tmp_path / "g", corpus, faiss_file=tmp_path / "none.index")
    with pytest.raises(FileNotFoundError):
        import_index(tmp_path / "h", tmp_path / "none.jsonl", faiss_file=flat)


def test_shifted_rows_fail_verify(wiki18_layout, tmp_path):
    lines = wiki18_layout["corpus"].read_text().splitlines(keepends=True)
    shifted = tmp_path / "shifted.jsonl"
    shifted.write_text("".join(lines[1:] + lines[:1]))
    out = tmp_path / "imp"
    import_index(out, shifted, faiss_file=wiki18_layout["faiss"], encoder="minilm",
                 ordered_ids=False)
    report = verify_index(out, sample=16)
    assert not report["ok"] and len(report["below_threshold"]) >= 12


def test_import_bm25s_and_both_as_hybrid(wiki18_layout, nq_queries, tmp_path):
    import bm25s
    import Stemmer

    out = tmp_path / "bm25"
    import_index(out, wiki18_layout["corpus"], bm25_dir=wiki18_layout["bm25"])
    assert (out / "bm25s").is_symlink()  # referenced, not copied
    idx = open_index(out)
    # each term's bound written beside the link, not into the referenced folder, and the
    # bounds a term's own list gives
    p = idx.postings
    assert p.stored_bounds is not None
    assert not (wiki18_layout["bm25"] / "term_bounds.npz").exists()
    lazy = Postings(p.data, p.rows, p.indptr, p.num_docs, small=0)
    assert [(float(a), bool(b)) for a, b in zip(*p.stored_bounds, strict=True)] \
        == [lazy.bound(t) for t in range(len(p.indptr) - 1)]
    p.small = 0  # the pruned path, with the stored bounds, gives bm25s's results below
    ref = bm25s.BM25.load(str(wiki18_layout["bm25"]))
    q = bm25s.tokenize(nq_queries, stopwords="en", stemmer=Stemmer.Stemmer("english"),
                       show_progress=False)
    rows, scores = ref.retrieve(q, k=3, show_progress=False)
    hits = idx.search_batch(nq_queries, 3)
    for h, r, s in zip(hits, rows, scores, strict=True):
        n = len(h.ids)
        np.testing.assert_allclose(h.scores, s[:n], rtol=1e-6)
        # the same passages; tied scores may come in another order (marag: corpus order)
        assert {(round(float(a), 5), str(b)) for a, b in zip(s[:n], r[:n], strict=True)
                if a > s[n - 1]} <= {(round(x, 5), i) for x, i in zip(h.scores, h.ids,
                                                                      strict=True)}
    both = tmp_path / "both"
    import_index(both, wiki18_layout["tar"], faiss_file=wiki18_layout["faiss"],
                 bm25_dir=wiki18_layout["bm25"], encoder="minilm")
    assert json.loads((both / "manifest.json").read_text())["kind"] == "hybrid"
    assert open_index(both).search_batch(["first nobel prize in physics"], 2)[0].ids[0] == "0"
    with pytest.raises(ImportError_, match="bm25s index holds 60 documents but .* 59"):
        short = tmp_path / "short.jsonl"
        short.write_text("".join(wiki18_layout["corpus"].read_text().splitlines(True)[:59]))
        import_index(tmp_path / "x", short, bm25_dir=wiki18_layout["bm25"])
    with pytest.raises(ImportError_, match="not a bm25s index directory"):
        import_index(tmp_path / "y", wiki18_layout["corpus"], bm25_dir=tmp_path)


def test_cli_import_search_verify_compress(wiki18_layout, tmp_path, capsys):
    out = tmp_path / "cli"
    assert main(["index", "import", "--faiss", str(wiki18_layout["faiss"]), "--corpus",
                 str(wiki18_layout["tar"]), "--encoder", "minilm", "--out", str(out)]) == 0
    said = capsys.readouterr().out
    assert "imported 60 passages" in said and "disk used" in said and "not copied" in said
    assert main(["search", str(out), "first nobel prize in physics", "-k", "2", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["passages"][0]["id"] == "0"
    assert main(["index", "verify", str(out), "--sample", "4"]) == 0
    assert json.loads(capsys.readouterr().out)["ok"] is True
    assert main(["index", "compress", str(out), "--tier", "ivf-sq8"]) == 0
    assert "built ivf-sq8" in capsys.readouterr().out
    assert main(["search", str(out), "first nobel prize in physics", "-k", "2", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["passages"][0]["id"] == "0"
    assert main(["index", "import", "--corpus", str(wiki18_layout["corpus"]), "--out",
                 str(tmp_path / "none")]) == 1
    assert "nothing to import" in capsys.readouterr().err
    with gzip.open(tmp_path / "bad.jsonl.gz", "wt") as f:
        f.write('{"id": "0"}\n')
    assert main(["index", "import", "--corpus", str(tmp_path / "bad.jsonl.gz"), "--faiss",
                 str(wiki18_layout["faiss"]), "--out", str(tmp_path / "bad")]) == 1
    assert "missing field 'contents' or 'text'" in capsys.readouterr().err


def test_settings_recorded_without_the_encoder_are_checked_on_open(wiki18_layout, tmp_path,
                                                                   monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    out = tmp_path / "e5"
    import_index(out, wiki18_layout["corpus"], faiss_file=wiki18_layout["faiss"],
                 encoder="intfloat/e5-base-v2", check_encoder=False)
    m = json.loads((out / "manifest.json").read_text())["query_encoder"]
    assert (m["query_prefix"], m["passage_prefix"], m["pooling"], m["dim"]) == (
        "query: ", "passage: ", "mean", 384)
    # E5 is not on this machine (no hub): opening says so instead of a traceback
    with pytest.raises(BadIndexError, match="cannot load the query encoder intfloat/e5-base-v2"):
        open_index(out)
