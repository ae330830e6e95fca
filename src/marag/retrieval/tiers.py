"""Memory tiers of a dense index, searched over one memory-mapped flat vector file.

* ``flat-mmap``: exact search straight from the flat file, block by block (faiss' BLAS
  inner product per block, results merged in a heap); nothing is loaded, the page cache holds
  what fits.
* ``ivf-sq8``: IVF lists of 8-bit scalar-quantised vectors (1 byte a dimension: 16 GB for
  wiki-18's 21M x 768).
* ``opq-ivfpq``: an OPQ rotation, IVF lists and product-quantised codes of ``pq_m`` bytes a
  vector (1.3 GB for wiki-18 at 64 bytes), with the top ``rerank`` candidates re-scored
  exactly from the memory-mapped flat rows.
* ``opq-ivfpq-fs``: the same with 4-bit codes (``pq_m`` sub-quantisers of 16 centroids,
  ``pq_m / 2`` bytes a vector) laid out for faiss' fast scan, which scores codes with SIMD
  table lookups in registers: about 10x the scan rate of 8-bit codes on a CPU
  (BENCHMARKS.md), for some recall that the re-rank wins back. Its lists are in RAM (the
  fast-scan layout has no on-disk form): 1.3 GB for wiki-18 at ``pq_m`` 128.

``build_tier`` streams the flat file: it trains on a random sample of rows, adds the rest in
shards of ``shard_rows`` written to disk, and merges the shards' lists into one on-disk list
file (faiss ``OnDiskInvertedLists``), so neither the float matrix nor all the codes are ever
in RAM; the tier's file is opened with its lists memory-mapped. ``opq-ivfpq-fs`` adds block
by block into one index whose codes are all it holds, and is read into RAM when opened.
"""

from __future__ import annotations

import math
import resource
import shutil
import time
from pathlib import Path
from typing import Any

import numpy as np

TIERS = ("flat-mmap", "ivf-sq8", "opq-ivfpq", "opq-ivfpq-fs")
COMPRESSED = TIERS[1:]
PQ_TIERS = ("opq-ivfpq", "opq-ivfpq-fs")
DEFAULT_NPROBE = {"ivf-sq8": 64, "opq-ivfpq": 64, "opq-ivfpq-fs": 64}
DEFAULT_RERANK = {"flat-mmap": 0, "ivf-sq8": 0, "opq-ivfpq": 200, "opq-ivfpq-fs": 200}
PQ_BITS = {"opq-ivfpq": 8, "opq-ivfpq-fs": 4}
OPQ_TRAIN_ROWS = 16384
SEARCH_BLOCK = 1 << 16  # flat rows per block: 64k x 768 x 4 B = 192 MiB of pages at a time


def default_nlist(n: int) -> int:
    """A power of two near sqrt(n), with at least 39 training points per list."""
    if n < 39 * 2:
        return 1
    nlist = 2 ** round(math.log2(max(1.0, math.sqrt(n))))
    return int(max(1, min(nlist, n // 39)))


def default_pq_m(dim: int) -> int:
    """Bytes per vector: 64 for 768 dims (wiki-18's E5), about dim/8 below 512 dims."""
    target = 64 if dim >= 512 else max(1, dim // 8)
    for m in range(target, 0, -1):
        if dim % m == 0:
            return m
    return 1


def default_fs_m(dim: int) -> int:
    """4-bit sub-quantisers of the fast-scan tier: twice the 8-bit tier's count (the same
    bytes a vector: 128 for 768 dims) where that divides the dimension."""
    m = 2 * default_pq_m(dim)
    return m if dim % m == 0 else default_pq_m(dim)


def _faiss_metric(metric: str) -> int:
    import faiss

    return faiss.METRIC_INNER_PRODUCT if metric == "inner_product" else faiss.METRIC_L2


def flat_search(vecs: Any, queries: np.ndarray, k: int, metric: str,
                block: int = SEARCH_BLOCK) -> tuple[np.ndarray, np.ndarray]:
    """Exact top-k over the rows of ``vecs`` (an array or a ``VectorReader``), one block at a
    time: ``(scores, rows)``, best first, rows -1 if none."""
    import faiss

    n = len(vecs)
    k = min(k, n)
    ip = metric == "inner_product"
    heap = faiss.ResultHeap(len(queries), k, keep_max=ip)
    buf = np.empty((min(block, n), queries.shape[1]), np.float32) if hasattr(vecs, "block") else None
    for lo in range(0, n, block):
        part = vecs.block(lo, lo + block, buf) if buf is not None else vecs[lo : lo + block]
        d, i = faiss.knn(queries, np.ascontiguousarray(part), min(k, len(part)),
                         metric=_faiss_metric(metric))
        if d.shape[1] < k:  # the last, short block: pad to the heap's width
            pad = k - d.shape[1]
            d = np.hstack([d, np.full((len(d), pad), -np.inf if ip else np.inf, np.float32)])
            i = np.hstack([i, np.full((len(i), pad), -1, np.int64)])
        heap.add_result(d, np.where(i >= 0, i + lo, -1))
    heap.finalize()
    return heap.D, heap.I


RERANK_CHUNK = 256  # queries re-ranked together: bounds the candidate buffer (256 x depth rows)


def rerank(vecs: Any, queries: np.ndarray, cand: np.ndarray, k: int,
           metric: str) -> tuple[np.ndarray, np.ndarray]:
    """Exact scores of each query's candidate rows (read from the flat file), top k kept."""
    nq = len(queries)
    out_s = np.full((nq, k), -np.inf if metric == "inner_product" else np.inf, np.float32)
    out_r = np.full((nq, k), -1, np.int64)
    take = vecs.take if hasattr(vecs, "take") else (lambda r: vecs[r])
    for lo in range(0, nq, RERANK_CHUNK):
        c = cand[lo : lo + RERANK_CHUNK]
        # each candidate row of the chunk read once, in file order
        uniq, inverse = np.unique(c, return_inverse=True)
        inverse = inverse.reshape(c.shape)
        valid = uniq >= 0
        exact = np.zeros((len(uniq), queries.shape[1]), np.float32)
        exact[valid] = take(uniq[valid])
        for j in range(len(c)):
            keep = c[j] >= 0
            if not keep.any():
                continue
            q = queries[lo + j]
            v = exact[inverse[j][keep]]
            if metric == "inner_product":
                s = v @ q
                top = np.argsort(-s, kind="stable")[:k]
            else:
                s = np.sum((v - q) ** 2, axis=1)
                top = np.argsort(s, kind="stable")[:k]
            out_s[lo + j, : len(top)] = s[top]
            out_r[lo + j, : len(top)] = c[j][keep][top]
    return out_s, out_r


def peak_rss_mib() -> float:
    """This process's peak resident set so far (ru_maxrss; Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def build_tier(
    vecs: Any,
    metric: str,
    tier: str,
    out_file: Path,
    nlist: int | None = None,
    pq_m: int | None = None,
    train_rows: int | None = None,
    shard_rows: int = 1 << 20,
    seed: int = 0,
    opq_iters: int = 10,
    log: Any = None,
) -> dict[str, Any]:
    """Build ``tier`` from the flat rows ``vecs`` into ``out_file`` (+ ``.ivfdata``, the
    on-disk lists of ivf-sq8 and opq-ivfpq); return its parameters and what it cost."""
    import faiss

    if tier not in COMPRESSED:
        raise ValueError(f"unknown tier {tier!r} (compressed tiers: {', '.join(COMPRESSED)})")
    n, dim = len(vecs), int(vecs.shape[1]) if hasattr(vecs, "shape") else vecs.dim
    take = vecs.take if hasattr(vecs, "take") else (lambda r: vecs[r])
    block = vecs.block if hasattr(vecs, "block") else (lambda a, b: vecs[a:b])
    if n == 0:
        raise ValueError("no vectors to compress")
    t0 = time.perf_counter()
    nlist = nlist or default_nlist(n)
    if nlist > n:
        raise ValueError(f"nlist {nlist} exceeds the {n} vectors")
    pq = tier in PQ_TIERS
    m = pq_m or (default_fs_m(dim) if tier == "opq-ivfpq-fs" else default_pq_m(dim))
    if pq and dim % m:
        raise ValueError(f"pq_m {m} must divide the dimension {dim}")
    centroids = 2 ** PQ_BITS.get(tier, 8)  # per PQ sub-space
    if pq and n < centroids:
        raise ValueError(f"{tier} needs at least {centroids} vectors to train its "
                         f"{PQ_BITS[tier]}-bit codebooks (this index has {n}); use ivf-sq8 "
                         "or flat-mmap")
    spec = {"ivf-sq8": f"IVF{nlist},SQ8", "opq-ivfpq": f"OPQ{m},IVF{nlist},PQ{m}",
            "opq-ivfpq-fs": f"OPQ{m},IVF{nlist},PQ{m}x4fs"}[tier]
    index = faiss.index_factory(dim, spec, _faiss_metric(metric))
    ivf = faiss.downcast_index(faiss.extract_index_ivf(index))
    if tier == "opq-ivfpq":
        # polysemous training re-orders codes for Hamming filtering, which is never used
        # here, and costs 20x the rest of training
        ivf.do_polysemous_training = False
    if pq:
        opq = faiss.downcast_VectorTransform(index.chain.at(0))
        opq.niter = opq_iters
        opq.max_train_points = OPQ_TRAIN_ROWS  # the rotation needs far fewer rows than PQ
    # faiss' k-means wants 39-256 points a centroid, PQ's codebooks 39 per centroid and
    # sub-space
    want = max(64 * nlist, centroids * 39 if pq else 0)
    n_train = min(n, train_rows or want)
    rng = np.random.default_rng(seed)
    rows = np.sort(rng.choice(n, size=n_train, replace=False))
    if log:
        log(f"{tier}: training {spec} on {n_train} of {n} rows")
    index.train(np.ascontiguousarray(take(rows), dtype=np.float32))
    del rows
    train_s = time.perf_counter() - t0
    if tier == "opq-ivfpq-fs":
        _add_in_memory(index, block, n, out_file, log)
    else:
        _add_on_disk(index, block, n, out_file, shard_rows, tier, log)
    ivfdata = out_file.with_name(out_file.name + ".ivfdata")
    disk = out_file.stat().st_size + (ivfdata.stat().st_size if ivfdata.is_file() else 0)
    return {
        "file": out_file.name,
        "spec": spec,
        "params": {"nlist": nlist, "pq_m": m if pq else None,
                   "pq_bits": PQ_BITS.get(tier), "train_rows": n_train,
                   "opq_iters": opq_iters if pq else None,
                   "nprobe": DEFAULT_NPROBE[tier],
                   "rerank": DEFAULT_RERANK[tier]},
        "cost": {
            "disk_bytes": disk,
            "build_seconds": round(time.perf_counter() - t0, 2),
            "train_seconds": round(train_s, 2),
            "build_peak_rss_mib": round(peak_rss_mib(), 1),
            "how": "build_peak_rss_mib: ru_maxrss of the compress process (the flat file is "
                   "read with pread, so it counts the training sample, one shard's codes (all "
                   "the codes for opq-ivfpq-fs) and faiss' buffers, not the file); "
                   "disk_bytes: the tier's index file plus its on-disk lists; serving "
                   "memory: benchmarks/retrieval_scale.py (BENCHMARKS.md)",
        },
    }


def _add_in_memory(index: Any, block: Any, n: int, out_file: Path, log: Any) -> None:
    """Every row into ``index`` block by block (the fast-scan lists stay in RAM), then one
    file."""
    import faiss

    for a in range(0, n, SEARCH_BLOCK):
        b = min(n, a + SEARCH_BLOCK)
        index.add_with_ids(np.ascontiguousarray(block(a, b)), np.arange(a, b, dtype=np.int64))
        if log and (b == n or b % (1 << 20) < SEARCH_BLOCK):
            log(f"opq-ivfpq-fs: added rows 0-{b} of {n}")
    out_file.with_name(out_file.name + ".ivfdata").unlink(missing_ok=True)
    tmp = out_file.with_name(out_file.name + ".tmp")
    faiss.write_index(index, str(tmp))
    tmp.replace(out_file)


def _add_on_disk(index: Any, block: Any, n: int, out_file: Path, shard_rows: int, tier: str,
                 log: Any) -> None:
    """Every row into shards written to disk, merged into one on-disk list file."""
    import faiss
    from faiss.contrib.ondisk import merge_ondisk

    tmp = out_file.with_name(out_file.name + ".shards")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    trained = tmp / "trained.faiss"
    faiss.write_index(index, str(trained))
    shards = []
    for lo in range(0, n, shard_rows):
        shard = faiss.read_index(str(trained))
        for a in range(lo, min(n, lo + shard_rows), SEARCH_BLOCK):
            b = min(n, lo + shard_rows, a + SEARCH_BLOCK)
            shard.add_with_ids(np.ascontiguousarray(block(a, b)), np.arange(a, b, dtype=np.int64))
        path = tmp / f"shard{len(shards):04d}.faiss"
        faiss.write_index(shard, str(path))
        shards.append(str(path))
        del shard
        if log:
            log(f"{tier}: added rows {lo}-{min(n, lo + shard_rows)} of {n}")
    ivfdata = out_file.with_name(out_file.name + ".ivfdata")
    ivfdata.unlink(missing_ok=True)
    merge_ondisk(index, shards, str(ivfdata))
    faiss.write_index(index, str(out_file))
    shutil.rmtree(tmp)


class TierSearcher:
    """Search one tier of an index: encoded queries in, ``(scores, rows)`` out."""

    def __init__(self, tier: str, vecs: Any, metric: str, index_file: Path | None = None,
                 nprobe: int | None = None, rerank_depth: int | None = None,
                 params: dict[str, Any] | None = None) -> None:
        params = params or {}
        self.tier, self.vecs, self.metric = tier, vecs, metric
        self.rerank = DEFAULT_RERANK.get(tier, 0) if rerank_depth is None else rerank_depth
        if rerank_depth is None and params.get("rerank") is not None:
            self.rerank = int(params["rerank"])
        self.index = None
        if tier == "flat-mmap":
            return
        import faiss

        if index_file is None or not index_file.is_file():
            raise FileNotFoundError(f"tier file missing: {index_file}")
        # the on-disk lists memory-map their own file (IO_FLAG_MMAP on top of them crashes);
        # the fast-scan tier's lists are read into RAM
        flags = (0 if tier == "opq-ivfpq-fs"
                 else faiss.IO_FLAG_READ_ONLY | faiss.IO_FLAG_ONDISK_SAME_DIR)
        self.index = faiss.read_index(str(index_file), flags)
        self.nprobe = nprobe or params.get("nprobe") or DEFAULT_NPROBE[tier]
        faiss.extract_index_ivf(self.index).nprobe = self.nprobe

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        n = len(self.vecs)
        k = min(k, n)
        if self.index is None:
            return flat_search(self.vecs, queries, k, self.metric)
        depth = min(n, max(k, self.rerank))
        scores, rows = self.index.search(queries, depth)
        if self.rerank > 0:
            return rerank(self.vecs, queries, rows, k, self.metric)
        return scores[:, :k], rows[:, :k]
