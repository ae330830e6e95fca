"""Dense retrieval at scale on synthetic vectors: build, disk, load, RSS, latency, batch time.

Steps, each its own process (so each phase's peak RSS is its own; run each under the shared
lock on the dev box):

    python benchmarks/retrieval_scale.py gen      --work W --n 1000000 --dim 768
    (--dim 0: the corpus without vectors, for the BM25 steps alone; --sparse: the flat
    file as a hole of its size, for a size whose vectors would not fit the disk)
    python benchmarks/retrieval_scale.py import   --work W
    python benchmarks/retrieval_scale.py compress --work W --tier ivf-sq8
    python benchmarks/retrieval_scale.py compress --work W --tier opq-ivfpq
    (--synthetic: rows made again from the generator, not read: with gen --sparse)
    python benchmarks/retrieval_scale.py serve    --work W --tier flat-mmap --single 20
    python benchmarks/retrieval_scale.py serve    --work W --tier ivf-sq8 --nprobe 64
    python benchmarks/retrieval_scale.py serve    --work W --tier opq-ivfpq --nprobe 64 --rerank 200
    python benchmarks/retrieval_scale.py encode   --work W          # query encoding, apart
    python benchmarks/retrieval_scale.py bm25-build --work W        # BM25 over the same corpus
    python benchmarks/retrieval_scale.py bm25-serve --work W [--per-term-bounds] [--release-every N]
    python benchmarks/retrieval_scale.py report   --work W [--work W4]

``gen`` writes a faiss ``IndexFlatIP`` file of unit vectors drawn around 4,096 random centres
(E5's layout: 45-byte header, float32 rows) and a corpus of real passages (wiki-demo + the
shared corpora, repeated under distinct ids) in Search-R1's ``{"id", "contents"}`` form.
Synthetic vectors give sizes and times only; recall comes from benchmarks/tier_recall.py.
Every step appends one JSON line to ``W/results.jsonl``; ``report`` prints the tables.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import struct
import sys
import threading
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))


def status() -> dict:
    out = {}
    with open("/proc/self/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("RssAnon", "RssFile", "VmRSS"):
                out[key + "_mib"] = round(int(value.split()[0]) / 1024, 1)
    return out


class Sampler:
    """Peak private (anonymous) memory, sampled every 0.1 s (ru_maxrss also counts file pages)."""

    def __init__(self) -> None:
        self.peak_anon = 0.0
        self._stop = threading.Event()
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self) -> None:
        while not self._stop.wait(0.1):
            self.peak_anon = max(self.peak_anon, status().get("RssAnon_mib", 0.0))

    def stop(self) -> dict:
        self._stop.set()
        return {"peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
                "peak_anon_mib": round(self.peak_anon, 1)}


def record(work: Path, row: dict) -> None:
    row = {"at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
           "load_avg": round(os.getloadavg()[0], 2), **row}
    with open(work / "results.jsonl", "a") as f:
        f.write(json.dumps(row) + "\n")
    print(json.dumps(row))


def du(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())


GEN_BLOCK = 1 << 16  # rows made from one seed


class SyntheticRows:
    """The synthetic vectors, row block b (``GEN_BLOCK`` rows) drawn from its own seed, so any
    row can be made again on demand: unit vectors around 4,096 random centres. ``gen`` writes
    these rows to the flat file; ``compress --synthetic`` builds a tier from them directly,
    for a size whose flat file would not fit the disk (21M x 768 = 64.6 GB). Duck-types the
    flat reader ``build_tier`` takes (``len``, ``shape``, ``take``, ``block``)."""

    def __init__(self, n: int, dim: int, seed: int = 0) -> None:
        self.n, self.dim, self.seed = n, dim, seed
        self.shape = (n, dim)
        self.centres = np.random.default_rng(seed).standard_normal((4096, dim)).astype(np.float32)
        self._last: tuple[int, np.ndarray] | None = None

    def __len__(self) -> int:
        return self.n

    def _block(self, b: int) -> np.ndarray:
        if self._last is not None and self._last[0] == b:
            return self._last[1]
        m = min(GEN_BLOCK, self.n - b * GEN_BLOCK)
        rng = np.random.default_rng([self.seed, b])
        x = self.centres[rng.integers(0, 4096, m)]
        x += 0.7 * rng.standard_normal((m, self.dim), np.float32)
        x /= np.linalg.norm(x, axis=1, keepdims=True)
        self._last = (b, x)
        return x

    def block(self, a: int, b: int) -> np.ndarray:
        parts = []
        for blk in range(a // GEN_BLOCK, (b - 1) // GEN_BLOCK + 1):
            lo = blk * GEN_BLOCK
            parts.append(self._block(blk)[max(a, lo) - lo : min(b, lo + GEN_BLOCK) - lo])
        return np.concatenate(parts) if len(parts) > 1 else parts[0].copy()

    def take(self, rows: np.ndarray) -> np.ndarray:
        rows = np.asarray(rows, dtype=np.int64)
        out = np.empty((len(rows), self.dim), np.float32)
        blocks = rows // GEN_BLOCK
        for blk in np.unique(blocks):
            sel = np.nonzero(blocks == blk)[0]
            out[sel] = self._block(int(blk))[rows[sel] - int(blk) * GEN_BLOCK]
        return out

    @classmethod
    def of(cls, work: Path) -> SyntheticRows | None:
        f = work / "synthetic.json"
        if not f.is_file():
            return None
        d = json.loads(f.read_text())
        return cls(d["n"], d["dim"], d["seed"])


def gen(work: Path, n: int, dim: int, seed: int = 0, sparse: bool = False) -> None:
    from retrieval_speed import make_scaled_corpus

    work.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    tmp = work / "corpus.tmp.jsonl"
    make_scaled_corpus(tmp, n)
    with open(tmp, encoding="utf-8") as src, open(work / "corpus.jsonl", "w", encoding="utf-8") as out:
        for i, line in enumerate(src):  # Search-R1's form: id = line number, quoted title
            p = json.loads(line)
            out.write(json.dumps({"id": str(i), "contents": f'"{p["title"]}"\n{p["text"]}'},
                                 ensure_ascii=False) + "\n")
    tmp.unlink()
    corpus_s = time.perf_counter() - t0
    if dim == 0:  # the corpus alone (BM25 at a size whose vectors would not fit the disk)
        record(work, {"step": "gen", "n": n, "dim": 0, "corpus_s": round(corpus_s, 1),
                      "seconds": round(corpus_s, 1), "corpus_bytes": du(work / "corpus.jsonl")})
        return
    rows = SyntheticRows(n, dim, seed)
    header = struct.pack("<4siqqqBiQ", b"IxFI", dim, n, 1 << 20, 1 << 20, 1, 0, n * dim)
    with open(work / "flat.index", "wb") as f:
        f.write(header)
        if sparse:  # the right size and header, no rows on disk (a hole): for import and
            # the compressed tiers built by compress --synthetic; never search it
            f.truncate(len(header) + 4 * n * dim)
        else:
            for lo in range(0, n, GEN_BLOCK):
                f.write(rows.block(lo, min(n, lo + GEN_BLOCK)).tobytes())
    (work / "synthetic.json").write_text(json.dumps({"n": n, "dim": dim, "seed": seed,
                                                     "flat_rows_on_disk": not sparse}))
    q = np.random.default_rng([seed, 1 << 40]).integers(0, n, 4096)
    np.save(work / "query_rows.npy", q)
    record(work, {"step": "gen", "n": n, "dim": dim, "sparse_flat": sparse,
                  "corpus_s": round(corpus_s, 1), "seconds": round(time.perf_counter() - t0, 1),
                  "flat_bytes": du(work / "flat.index"), "corpus_bytes": du(work / "corpus.jsonl")})


def queries(work: Path, dim: int, count: int) -> np.ndarray:
    """Queries near stored rows (a row plus noise, renormalised)."""
    from marag.retrieval.vectors import read_faiss_flat

    rows = np.load(work / "query_rows.npy")[:count]
    source = SyntheticRows.of(work) or read_faiss_flat(work / "flat.index").reader()
    rng = np.random.default_rng(1)
    q = source.take(rows) + 0.5 * rng.standard_normal((len(rows), dim)).astype(np.float32) / np.sqrt(dim)
    return (q / np.linalg.norm(q, axis=1, keepdims=True)).astype(np.float32)


def do_import(work: Path) -> None:
    from marag.retrieval.imported import import_index

    s = Sampler()
    t0 = time.perf_counter()
    rep = import_index(work / "index", work / "corpus.jsonl", faiss_file=work / "flat.index",
                       encoder="intfloat/e5-base-v2", check_encoder=False)
    record(work, {"step": "import", "seconds": round(time.perf_counter() - t0, 1),
                  "disk_bytes": rep["disk_bytes"], **s.stop()})


def compress(work: Path, tier: str, nlist: int | None, train_rows: int | None,
             synthetic: bool = False) -> None:
    from marag.retrieval.imported import compress_index

    rows = SyntheticRows.of(work) if synthetic else None
    if synthetic and rows is None:
        raise SystemExit(f"{work}: no synthetic.json (run gen first)")
    s = Sampler()
    rec = compress_index(work / "index", tier, nlist=nlist, train_rows=train_rows,
                         make_default=False, log=lambda m: print(m, file=sys.stderr), rows=rows)
    record(work, {"step": "compress", "tier": tier, "spec": rec["spec"], "synthetic": synthetic,
                  **rec["cost"], "params": rec["params"], **s.stop()})


def serve(work: Path, tier: str, nprobe: int | None, rerank: int | None, single: int,
          batch: int, k: int) -> None:
    from marag.retrieval.tiered import TieredDenseIndex

    s = Sampler()
    t0 = time.perf_counter()
    idx = TieredDenseIndex(work / "index", tier=tier, nprobe=nprobe, rerank=rerank,
                           load_encoder=False)
    load_s = time.perf_counter() - t0
    after_load = status()
    q = queries(work, idx.vectors.dim, max(single + 5, batch))

    def answer(vecs: np.ndarray) -> list:
        rows, _ = idx.search_vectors(vecs, k)
        return [idx.store.get_many(r[r >= 0]) for r in rows]  # passage text, as served

    answer(q[:5])  # warm-up
    lat = []
    for i in range(5, 5 + single):
        t1 = time.perf_counter()
        answer(q[i : i + 1])
        lat.append(time.perf_counter() - t1)
    t2 = time.perf_counter()
    answer(q[:batch])
    batch_s = time.perf_counter() - t2
    record(work, {"step": "serve", "tier": tier, "nprobe": getattr(idx.searcher, "nprobe", None),
                  "rerank": idx.searcher.rerank, "k": k, "load_s": round(load_s, 3),
                  "after_load": after_load, "single_queries": single,
                  "p50_ms": round(1000 * float(np.percentile(lat, 50)), 2),
                  "p99_ms": round(1000 * float(np.percentile(lat, 99)), 2),
                  "batch": batch, "batch_s": round(batch_s, 2), "after": status(), **s.stop()})


def encode(work: Path, batch: int) -> None:
    from retrieval_speed import questions

    from marag.retrieval.dense import encode as enc
    from marag.retrieval.dense import load_encoder

    model = load_encoder("minilm")
    qs = (questions() * 3)[:batch]
    enc(model, qs[:64])
    t0 = time.perf_counter()
    enc(model, qs)
    record(work, {"step": "encode", "encoder": "all-MiniLM-L6-v2", "queries": len(qs),
                  "seconds": round(time.perf_counter() - t0, 2)})


def bm25_build(work: Path) -> None:
    from marag.retrieval import build_index

    s = Sampler()
    t0 = time.perf_counter()
    build_index(work / "corpus.jsonl", work / "bm25", kind="bm25", show_progress=False)
    record(work, {"step": "bm25-build", "seconds": round(time.perf_counter() - t0, 1),
                  "disk_bytes": du(work / "bm25"), **s.stop()})


def bm25_serve(work: Path, single: int, batch: int, k: int, per_term: bool = False,
               release_every: int | None = None) -> None:
    from retrieval_speed import questions

    from marag.retrieval import open_index

    s = Sampler()
    t0 = time.perf_counter()
    idx = open_index(work / "bm25")
    if release_every is not None:  # 0: the matrix's pages a search read stay mapped
        idx.release_every = release_every
    if per_term:  # as before bounds were stored: each term's column read whole on first use
        # (the load still read the bounds file: load_s and after_load are this version's)
        idx.postings.stored_bounds = None
    load_s = time.perf_counter() - t0
    after_load = status()
    qs = (questions() * 3)[: max(batch, single + 5)]
    idx.search_batch(qs[:5], k)
    lat = []
    for q in qs[5 : 5 + single]:
        t1 = time.perf_counter()
        idx.search_batch([q], k)
        lat.append(time.perf_counter() - t1)
    t2 = time.perf_counter()
    idx.search_batch(qs[:batch], k)
    record(work, {"step": "bm25-serve", "bm25_search": "maxscore" if hasattr(idx, "postings")
                  else "exhaustive", "bounds": "stored" if getattr(
                      getattr(idx, "postings", None), "stored_bounds", None) is not None
                  else "per-term", "release_every": getattr(idx, "release_every", None),
                  "k": k, "load_s": round(load_s, 3),
                  "after_load": after_load, "single_queries": single,
                  "p50_ms": round(1000 * float(np.percentile(lat, 50)), 2),
                  "p99_ms": round(1000 * float(np.percentile(lat, 99)), 2),
                  "batch": batch, "batch_s": round(time.perf_counter() - t2, 2),
                  "after": status(), **s.stop()})


def report(works: list[Path]) -> None:
    for w in works:
        rows = [json.loads(x) for x in (w / "results.jsonl").read_text().splitlines()]
        print(f"\n## {w}")
        for r in rows:
            print(json.dumps(r))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("step", choices=["gen", "import", "compress", "serve", "encode",
                                     "bm25-build", "bm25-serve", "report"])
    ap.add_argument("--work", type=Path, action="append", required=True)
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--dim", type=int, default=768)
    ap.add_argument("--tier", default="flat-mmap")
    ap.add_argument("--nlist", type=int, default=None)
    ap.add_argument("--train-rows", type=int, default=None)
    ap.add_argument("--nprobe", type=int, default=None)
    ap.add_argument("--rerank", type=int, default=None)
    ap.add_argument("--single", type=int, default=200, help="single-query latency samples")
    ap.add_argument("--batch", type=int, default=2560, help="queries in the batch (Search-R1: 2,560)")
    ap.add_argument("-k", type=int, default=3)
    ap.add_argument("--release-every", type=int, default=None, metavar="N",
                    help="bm25-serve: hand the matrix's pages back every N queries (0: "
                         "never, as before; default: the index's own setting)")
    ap.add_argument("--sparse", action="store_true",
                    help="gen: the flat file as a hole of its size (no rows on disk); build "
                         "the tiers with compress --synthetic and never serve flat-mmap or a "
                         "re-rank from it")
    ap.add_argument("--synthetic", action="store_true",
                    help="compress: make the rows again from the generator instead of reading "
                         "the flat file")
    ap.add_argument("--per-term-bounds", action="store_true",
                    help="bm25-serve: ignore the stored bounds (as an index built before them)")
    a = ap.parse_args()
    w = a.work[0]
    if a.step == "gen":
        gen(w, a.n, a.dim, sparse=a.sparse)
    elif a.step == "import":
        do_import(w)
    elif a.step == "compress":
        compress(w, a.tier, a.nlist, a.train_rows, a.synthetic)
    elif a.step == "serve":
        serve(w, a.tier, a.nprobe, a.rerank, a.single, a.batch, a.k)
    elif a.step == "encode":
        encode(w, a.batch)
    elif a.step == "bm25-build":
        bm25_build(w)
    elif a.step == "bm25-serve":
        bm25_serve(w, a.single, a.batch, a.k, a.per_term_bounds, a.release_every)
    else:
        report(a.work)


if __name__ == "__main__":
    main()
