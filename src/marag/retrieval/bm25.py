"""BM25 indexes stored in bm25s's own format, built by streaming the corpus.

bm25s's ``BM25.index`` wants every document's token list in memory at once and counts
frequencies with per-document Python loops. Here the corpus is read once in batches: each
batch is written to the document store and tokenised with bm25s's ``Tokenizer`` (PyStemmer
English stemmer, English stopwords), and its ``(doc, token, tf, rank)`` columns go to files.
The score matrix is then scattered into memory-mapped arrays with the same formulas and the
same float32/float64 arithmetic as bm25s, so the saved index is the one ``bm25s.BM25.index``
would produce (a test compares them), and it is loaded back with
``bm25s.BM25.load(mmap=True)``.
"""

from __future__ import annotations

import json
import logging
import mmap
import os
import shutil
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

from marag.corpus import build_store
from marag.jax_tf import import_bm25s
from marag.retrieval.base import Retriever
from marag.retrieval.bm25_topk import Postings, column_bounds
from marag.retrieval.manifest import (
    MANIFEST,
    STORE_DIR,
    BadIndexError,
    corpus_record,
    open_store,
    read_manifest,
    write_manifest,
)
from marag.types import Hits

log = logging.getLogger(__name__)

BM25_DIR = "bm25s"
# each term's largest score and whether MaxScore may prune with it (column_bounds): written
# by the build and the import, so serving never reads a whole posting list to find them
BOUNDS_FILE = "term_bounds.npz"
RELEASE_EVERY = 16  # queries between handing the score matrix's file pages back
DEFAULT_PARAMS = {"k1": 1.5, "b": 0.75, "method": "lucene"}


def make_stemmer() -> Any:
    import Stemmer

    return Stemmer.Stemmer("english")


def tokenize_queries(queries: list[str], stemmer: Any) -> list[list[str]]:
    """Queries as stemmed token strings, exactly as ``bm25s.tokenize`` produces them."""
    bm25s = import_bm25s()

    return bm25s.tokenize(
        queries, stopwords="en", stemmer=stemmer, return_ids=False, show_progress=False
    )


class _Counts:
    """Per-batch ``(doc, token, tf, rank)`` columns, appended to files on disk.

    ``rank`` is the entry's position among all entries of its token so far (entries arrive in
    doc order), so its final place in the column-sorted matrix is ``indptr[token] + rank``:
    no global sort, and nothing proportional to the corpus is held in RAM except 8 bytes of
    length per document.
    """

    COLUMNS = ("doc", "tok", "tf", "rank")

    def __init__(self, tmp: Path) -> None:
        tmp.mkdir(parents=True, exist_ok=True)
        self.tmp = tmp
        self.files = {c: open(tmp / f"{c}.i32", "wb") for c in self.COLUMNS}  # noqa: SIM115
        self.lengths: list[np.ndarray] = []
        self.cursor = np.zeros(1 << 16, dtype=np.int64)  # entries seen so far, per token
        self.nnz = 0

    def add(self, start: int, ids: list[list[int]]) -> None:
        lengths = np.fromiter((len(x) for x in ids), dtype=np.int64, count=len(ids))
        flat = np.fromiter((t for x in ids for t in x), dtype=np.int64, count=int(lengths.sum()))
        local = np.repeat(np.arange(len(ids), dtype=np.int64), lengths)
        keys, tf = np.unique((local << 32) | flat, return_counts=True)
        doc, tok = (keys >> 32) + start, keys & 0xFFFFFFFF
        order = np.argsort(tok, kind="stable")
        st = tok[order]
        starts = np.flatnonzero(np.r_[True, st[1:] != st[:-1]]) if len(st) else np.empty(0, np.int64)
        sizes = np.diff(np.r_[starts, len(st)])
        if len(st) and st[-1] >= len(self.cursor):
            grown = np.zeros(max(2 * len(self.cursor), int(st[-1]) + 1), dtype=np.int64)
            grown[: len(self.cursor)] = self.cursor
            self.cursor = grown
        rank = np.empty(len(st), dtype=np.int64)
        rank[order] = self.cursor[st] + (np.arange(len(st)) - np.repeat(starts, sizes))
        self.cursor[st[starts]] += sizes
        for name, col in zip(self.COLUMNS, (doc, tok, tf, rank), strict=True):
            self.files[name].write(col.astype(np.int32).tobytes())
        self.lengths.append(lengths)
        self.nnz += len(keys)

    def columns(self) -> dict[str, np.ndarray]:
        for f in self.files.values():
            f.close()
        if self.nnz == 0:
            return {c: np.empty(0, np.int32) for c in self.COLUMNS}
        return {c: np.memmap(self.tmp / f"{c}.i32", dtype=np.int32, mode="r") for c in self.COLUMNS}


def _score_matrix(counts: _Counts, n_vocab: int, k1: float, b: float, method: str) -> dict[str, Any]:
    """The CSC arrays bm25s would build, written straight to memory-mapped files."""
    import_bm25s()
    from bm25s.scoring import _select_idf_scorer

    if method not in ("lucene", "robertson", "atire"):
        raise ValueError(f"BM25 method {method!r} is not supported (lucene, robertson, atire)")
    cols = counts.columns()
    lengths = np.concatenate(counts.lengths) if counts.lengths else np.empty(0, np.int64)
    n_docs, nnz = len(lengths), counts.nnz
    avg_len = lengths.mean()  # float64, as bm25s computes it
    df = np.zeros(n_vocab, dtype=np.int64)
    m = min(n_vocab, len(counts.cursor))
    df[:m] = counts.cursor[:m]
    idf_fn = _select_idf_scorer(method)
    # math.log per term keeps the idf bit-identical to bm25s (np.log may differ in the last ulp)
    idf = np.array([idf_fn(int(d), N=n_docs) if d else 0.0 for d in df], dtype=np.float32)
    indptr = np.zeros(n_vocab + 1, dtype=np.int64)
    np.cumsum(df, out=indptr[1:])
    shape = (max(nnz, 1),)  # numpy cannot map an empty file
    data = np.lib.format.open_memmap(counts.tmp / "data.npy", "w+", np.float32, shape)
    rows = np.lib.format.open_memmap(counts.tmp / "rows.npy", "w+", np.int32, shape)
    step = 1 << 22
    for lo in range(0, nnz, step):
        sl = slice(lo, lo + step)
        doc, tok = np.asarray(cols["doc"][sl]), np.asarray(cols["tok"][sl])
        tf64 = np.asarray(cols["tf"][sl]).astype(np.float32).astype(np.float64)
        l_d = lengths[doc].astype(np.float64)
        if method == "atire":
            tfc = (tf64 * (k1 + 1)) / (tf64 + k1 * (1 - b + b * l_d / avg_len))
        else:
            tfc = tf64 / (k1 * ((1 - b) + b * l_d / avg_len) + tf64)
        pos = indptr[tok] + cols["rank"][sl]
        data[pos] = (idf[tok].astype(np.float64) * tfc).astype(np.float32)
        rows[pos] = doc
    return {"data": data[:nnz], "indices": rows[:nnz], "indptr": indptr, "num_docs": n_docs}


def build_bm25(
    corpus_path: str | os.PathLike[str],
    out_dir: str | os.PathLike[str],
    batch_size: int = 4096,
    show_progress: bool = True,
    k1: float = 1.5,
    b: float = 0.75,
    method: str = "lucene",
) -> Path:
    bm25s = import_bm25s()
    from bm25s.tokenization import Tokenizer

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    corpus = corpus_record(corpus_path)
    (out / MANIFEST).unlink(missing_ok=True)  # a rebuild that fails must not look finished
    tokenizer = Tokenizer(stopwords="en", stemmer=make_stemmer())
    counts = _Counts(out / "build.tmp")

    def on_batch(start: int, passages: list[Any]) -> None:
        texts = [f"{p.title}\n{p.text}" for p in passages]
        counts.add(start, list(tokenizer.streaming_tokenize(texts, update_vocab=True)))

    store = build_store(corpus_path, out / STORE_DIR, batch_size, on_batch, show_progress)
    if len(store) == 0:
        raise ValueError(f"{corpus_path}: corpus has no passages")
    vocab = tokenizer.get_vocab_dict()
    if "" not in vocab:  # bm25s keeps an empty token so queries with no known words still score
        vocab[""] = max(vocab.values(), default=-1) + 1
    scores = _score_matrix(counts, len(vocab), k1, b, method)
    model = bm25s.BM25(k1=k1, b=b, method=method)
    model.scores, model.vocab_dict = scores, vocab
    model.nonoccurrence_array = None  # only bm25l/bm25+ use it; those are not offered
    model.save(str(out / BM25_DIR), show_progress=False)
    write_bounds(out, scores)
    del model, scores
    shutil.rmtree(out / "build.tmp")
    write_manifest(
        out,
        kind="bm25",
        corpus=corpus,
        count=len(store),
        build_seconds=time.perf_counter() - t0,
        params={"k1": k1, "b": b, "method": method, "tokenizer": "bm25s+PyStemmer-english+stopwords-en"},
    )
    store.close()
    return out


def matrix_fingerprint(bm25s_dir: Path, scores: dict[str, Any]) -> dict[str, Any]:
    """What the stored bounds were computed from: the shape of the score matrix and, for
    each of bm25s's files (followed through a link), its size and a hash of 16 blocks spread
    over it, so bounds left from another matrix (a rebuilt or re-saved bm25s folder) are
    never trusted, while a copied index keeps its bounds. Reads 64 KiB a file."""
    import hashlib

    files = {}
    for f in sorted(Path(bm25s_dir).resolve().iterdir()):
        if not f.is_file():
            continue
        size = f.stat().st_size
        h = hashlib.sha1(usedforsecurity=False)
        with open(f, "rb") as fh:
            for i in range(16):
                fh.seek(max(size - 4096, 0) * i // 15)
                h.update(fh.read(4096))
        files[f.name] = [size, h.hexdigest()]
    return {"terms": len(scores["indptr"]) - 1, "nnz": int(scores["indptr"][-1]),
            "num_docs": int(scores["num_docs"]), "files": files}


def write_bounds(out: Path, scores: dict[str, Any]) -> None:
    """Every term's bound (``column_bounds``) into ``out/term_bounds.npz`` with the
    fingerprint of the matrix in ``out/bm25s``; written whole or not at all."""
    top, ok = column_bounds(scores["data"], scores["indices"], scores["indptr"])
    fingerprint = json.dumps(matrix_fingerprint(out / BM25_DIR, scores), sort_keys=True)
    tmp = out / "term_bounds.tmp.npz"
    with open(tmp, "wb") as f:
        np.savez(f, top=top, ok=ok, fingerprint=np.array(fingerprint))
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, out / BOUNDS_FILE)


def read_bounds(index_dir: Path, scores: dict[str, Any]) -> tuple[np.ndarray, np.ndarray] | None:
    """The stored bounds, or None (an index built before they were stored: each term's
    bound is then found on its first search). A file that cannot be read, or was computed
    from another matrix, is ignored, loudly: a wrong bound would drop real results."""
    path = index_dir / BOUNDS_FILE
    if not path.is_file():
        return None
    n_terms = len(scores["indptr"]) - 1
    try:
        with np.load(path, allow_pickle=False) as f:
            top, ok, stored = f["top"], f["ok"], json.loads(str(f["fingerprint"]))
        now = matrix_fingerprint(index_dir / BM25_DIR, scores)
        if stored != now:
            log.warning("%s was computed from another score matrix than %s holds now; bounds "
                        "are found per term instead (rebuild or re-import to store them)",
                        path, index_dir / BM25_DIR)
            return None
        if top.shape != (n_terms,) or ok.shape != (n_terms,) or ok.dtype != bool \
                or top.dtype.kind != "f":
            raise ValueError(f"bounds of shape {top.shape} ({top.dtype}) for {n_terms} terms")
        return top, ok
    except Exception as e:  # noqa: BLE001 - any damage means: do without
        log.warning("%s: unreadable (%s: %s); bounds are found per term instead", path,
                    type(e).__name__, e)
        return None


class BM25Index(Retriever):
    """A built BM25 index; the score matrix is memory-mapped and text comes from the store."""

    name = "bm25"

    def __init__(self, index_dir: str | os.PathLike[str], manifest: dict[str, Any] | None = None) -> None:
        bm25s = import_bm25s()

        self.dir = Path(index_dir)
        self.manifest = manifest or read_manifest(self.dir)
        if self.manifest["kind"] != "bm25":
            raise BadIndexError(f"{self.dir}: not a BM25 index (kind {self.manifest['kind']!r})")
        self.model = bm25s.BM25.load(str(self.dir / BM25_DIR), mmap=True, show_progress=False)
        self.store = open_store(self.dir, self.manifest)
        self._local = threading.local()
        # plain ndarray views of bm25s's memory maps: indexing np.memmap costs microseconds
        scores = self.model.scores
        indptr = np.asarray(scores["indptr"]).view(np.ndarray)
        self.postings = Postings(np.asarray(scores["data"]).view(np.ndarray),
                                 np.asarray(scores["indices"]).view(np.ndarray),
                                 indptr, int(scores["num_docs"]),
                                 bounds=read_bounds(self.dir, scores))
        self._num_docs = self.postings.num_docs
        # The matrix's file pages a search reads stay mapped into this process and count in
        # its RSS (measured: 5.9 GB of the 7 GB matrix after 2,560 questions at 21M passages).
        # Every `release_every` queries they are handed back (madvise DONTNEED): the kernel's
        # page cache keeps them, reclaimable, and the next search maps what it reads again.
        # 0 keeps them mapped.
        self.release_every = RELEASE_EVERY
        self._maps = [m for m in (getattr(scores["data"], "_mmap", None),
                                  getattr(scores["indices"], "_mmap", None)) if m is not None]
        self._since_release = 0

    def __len__(self) -> int:
        return len(self.store)

    def stemmer(self) -> Any:
        # PyStemmer objects must not be shared between threads; servers search from several
        stemmer = getattr(self._local, "stemmer", None)
        if stemmer is None:
            stemmer = self._local.stemmer = make_stemmer()
        return stemmer

    def search_rows(self, queries: list[str], k: int) -> tuple[np.ndarray, np.ndarray]:
        """Row indices and scores, shape ``(len(queries), min(k, n))``, best first.

        A row is -1 (as in faiss) where fewer passages than ``k`` score above zero: a passage
        that shares no term with the query is not a hit, however few hits there are. With the
        default Lucene scoring every matching passage scores above zero (its idf is positive).
        """
        k = min(k, self._num_docs)
        if not queries or k <= 0:
            return np.empty((len(queries), 0), np.int64), np.empty((len(queries), 0), np.float32)
        vocab = self.model.vocab_dict
        out_rows = np.empty((len(queries), k), dtype=np.int64)
        out_scores = np.empty((len(queries), k), dtype=np.float32)
        for i, tokens in enumerate(tokenize_queries(queries, self.stemmer())):
            ids = [vocab[t] for t in tokens if t in vocab]
            out_rows[i], out_scores[i] = self.postings.top(ids, k)
            self._since_release += 1
            if self.release_every and self._since_release >= self.release_every:
                self.release_pages()
        out_rows[out_scores <= 0] = -1
        return out_rows, out_scores

    def release_pages(self) -> None:
        """Unmap the score matrix's pages from this process (they stay in the page cache);
        safe while other threads search: a read maps its page again."""
        self._since_release = 0
        for m in self._maps:
            try:
                m.madvise(mmap.MADV_DONTNEED)
            except (OSError, ValueError, AttributeError):  # closed, or not supported here
                pass

    def search_batch(self, queries: list[str], k: int) -> list[Hits]:
        rows, scores = self.search_rows(queries, k)
        out = []
        for q, r, sc in zip(queries, rows.tolist(), scores.tolist(), strict=True):
            n = sum(1 for row in r if row >= 0)  # hits come first: they outscore every non-hit
            out.append(Hits(q, self.store.get_many(r[:n]), [float(s) for s in sc[:n]]))
        return out

    def close(self) -> None:
        self.store.close()

