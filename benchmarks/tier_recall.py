"""Recall@10 of each compressed tier against exact flat search, on real vectors.

    python benchmarks/tier_recall.py encode  --work W   # MiniLM over the pooled shared corpora
    python benchmarks/tier_recall.py measure --work W   # tiers built, nprobe/re-rank swept

The vectors are the pooled shared corpora (../shared/data/*.corpus.jsonl, 11,995 passages)
encoded with the offline all-MiniLM-L6-v2 (384 dims). Two query sets: every shared question
encoded with the same model (real queries), and synthetic queries drawn near stored rows (a
row plus Gaussian noise, renormalised; cosine about 0.85 to the row). The truth is the exact
top-10 of the flat vectors; recall@10 = |tier top-10 ∩ flat top-10| / 10, averaged.

The corpus is small next to wiki-18, so what carries over is the fraction of the lists
probed (nprobe / nlist), printed beside each row, and the re-rank depth; wiki-18's default
nlist is 4,096 (``marag.retrieval.tiers.default_nlist``).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data"
SETS = ("hotpotqa", "2wikimultihopqa", "musique", "nq_open")


def pooled_corpus(path: Path) -> int:
    from marag.corpus import iter_corpus

    seen, n = set(), 0
    with open(path, "w", encoding="utf-8") as f:
        for s in SETS:
            for p in iter_corpus(DATA / f"{s}.corpus.jsonl", check_duplicates=False):
                if p.id in seen:
                    continue
                seen.add(p.id)
                f.write(json.dumps({"id": p.id, "title": p.title, "text": p.text},
                                   ensure_ascii=False) + "\n")
                n += 1
    return n


def encode(work: Path) -> None:
    from marag.retrieval import build_index

    work.mkdir(parents=True, exist_ok=True)
    corpus = work / "pooled.jsonl"
    if not corpus.is_file():
        print(f"pooled corpus: {pooled_corpus(corpus)} passages", file=sys.stderr)
    t0 = time.perf_counter()
    build_index(corpus, work / "dense", kind="dense", batch_size=256, show_progress=True)
    print(json.dumps({"step": "encode", "seconds": round(time.perf_counter() - t0, 1)}))


def query_sets(work: Path, vecs: np.ndarray, n_synth: int) -> dict[str, np.ndarray]:
    from marag.retrieval.dense import encode as enc
    from marag.retrieval.dense import load_encoder
    from marag.types import iter_jsonl

    cache = work / "questions.npy"
    if cache.is_file():
        real = np.load(cache)
    else:
        qs = [q["question"] for s in SETS for _, q in iter_jsonl(DATA / f"{s}.questions.jsonl")]
        real = enc(load_encoder("minilm"), qs)
        np.save(cache, real)
    rng = np.random.default_rng(0)
    rows = rng.choice(len(vecs), n_synth, replace=False)
    noise = rng.standard_normal((n_synth, vecs.shape[1])).astype(np.float32)
    synth = vecs[rows] + 0.6 * noise / np.sqrt(vecs.shape[1])
    synth /= np.linalg.norm(synth, axis=1, keepdims=True)
    return {"real questions": real, "near-row synthetic": synth.astype(np.float32)}


def recall(rows: np.ndarray, truth: np.ndarray) -> float:
    return float(np.mean([len(set(r) & set(t)) / truth.shape[1]
                          for r, t in zip(rows.tolist(), truth.tolist(), strict=True)]))


def measure(work: Path, nprobes: list[int], reranks: list[int], pq_ms: list[int],
            nlist: int | None, n_synth: int, sq8_reranks: list[int], out_name: str,
            tiers: list[str], fs_ms: list[int]) -> None:
    from marag.retrieval.imported import compress_index
    from marag.retrieval.tiered import TieredDenseIndex
    from marag.retrieval.tiers import PQ_TIERS, flat_search

    src = work / "dense"
    vecs = np.load(src / "embeddings.npy", mmap_mode="r")
    sets = query_sets(work, np.asarray(vecs), n_synth)
    truth = {name: flat_search(vecs, q, 10, "inner_product")[1] for name, q in sets.items()}
    results = []

    def run(idx_dir: Path, tier: str, label: dict) -> None:
        for nprobe in nprobes:
            for rr in (reranks if tier in PQ_TIERS else sq8_reranks):
                idx = TieredDenseIndex(idx_dir, tier=tier, nprobe=nprobe, rerank=rr,
                                       load_encoder=False)
                nl = idx.manifest["tiers"][tier]["params"]["nlist"]
                row = {**label, "tier": tier, "nlist": nl, "nprobe": nprobe,
                       "probed": round(nprobe / nl, 4), "rerank": rr}
                for name, q in sets.items():
                    t0 = time.perf_counter()
                    rows, _ = idx.search_vectors(q, 10)
                    row[name] = round(recall(rows, truth[name]), 4)
                    row[name + " s"] = round(time.perf_counter() - t0, 3)
                results.append(row)
                print(json.dumps(row), flush=True)
                idx.close()

    sizes = {"ivf-sq8": [None], "opq-ivfpq": pq_ms, "opq-ivfpq-fs": fs_ms}
    for tier in tiers:
        for m in sizes[tier]:
            d = work / f"idx-{tier}-{m}"
            shutil.rmtree(d, ignore_errors=True)
            shutil.copytree(src, d)
            t0 = time.perf_counter()
            rec = compress_index(d, tier, nlist=nlist, pq_m=m)
            per = vecs.shape[1] if m is None else m // 2 if tier == "opq-ivfpq-fs" else m
            label = {"spec": rec["spec"], "bytes_per_vector": per,
                     "build_s": round(time.perf_counter() - t0, 1)}
            run(d, tier, label)
    (work / out_name).write_text("".join(json.dumps(r) + "\n" for r in results))
    print(f"{len(vecs)} vectors x {vecs.shape[1]} dims; queries: "
          + ", ".join(f"{k}: {len(v)}" for k, v in sets.items()))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("step", choices=["encode", "measure"])
    ap.add_argument("--work", type=Path, default=Path("/tmp/marag-bench/tier-recall"))
    ap.add_argument("--nprobe", type=int, nargs="+", default=[4, 8, 16, 32, 64])
    ap.add_argument("--rerank", type=int, nargs="+", default=[0, 50, 100, 200, 400])
    ap.add_argument("--sq8-rerank", type=int, nargs="+", default=[0])
    ap.add_argument("--pq-m", type=int, nargs="+", default=[32, 48])
    ap.add_argument("--fs-m", type=int, nargs="+", default=[64, 96],
                    help="opq-ivfpq-fs sub-quantisers (4 bits each: m/2 bytes a vector)")
    ap.add_argument("--tiers", nargs="+", default=["ivf-sq8", "opq-ivfpq", "opq-ivfpq-fs"],
                    choices=["ivf-sq8", "opq-ivfpq", "opq-ivfpq-fs"])
    ap.add_argument("--out", default="recall.jsonl", help="results file under --work")
    ap.add_argument("--nlist", type=int, default=256)
    ap.add_argument("--synthetic", type=int, default=2000)
    a = ap.parse_args()
    if a.step == "encode":
        encode(a.work)
    else:
        measure(a.work, a.nprobe, a.rerank, a.pq_m, a.nlist, a.synthetic, a.sq8_rerank, a.out,
                a.tiers, a.fs_m)


if __name__ == "__main__":
    main()
