"""Recall of gold supporting titles in the top-k passages: BM25, dense (MiniLM, flat), hybrid.

    .venv/bin/python benchmarks/retrieval_recall.py --dataset hotpotqa -k 5

Indexes are built once into --work and reused. For each question, recall is the fraction of
its ``supporting_titles`` found among the titles of the top-k passages; "all" is the
fraction of questions with every supporting title in the top-k.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def title_recall(gold: list[str], retrieved: list[str]) -> tuple[float, bool]:
    if not gold:
        raise ValueError("question without supporting titles")
    found = set(gold) & set(retrieved)
    return len(found) / len(set(gold)), found == set(gold)


def ensure(kind: str, corpus: Path, work: Path) -> Path:
    from marag.retrieval import build_index
    from marag.retrieval.hybrid import make_hybrid
    from marag.retrieval.manifest import MANIFEST

    out = work / kind
    if (out / MANIFEST).is_file():
        return out
    t0 = time.perf_counter()
    if kind == "hybrid":
        make_hybrid(out, ensure("bm25", corpus, work), ensure("dense", corpus, work))
    else:
        build_index(corpus, out, kind=kind, show_progress=True)
    print(f"built {kind} in {time.perf_counter() - t0:.1f}s")
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data-dir", type=Path, default=REPO.parent / "shared" / "data")
    ap.add_argument("--dataset", default="hotpotqa")
    ap.add_argument("--kinds", default="bm25,dense,hybrid")
    ap.add_argument("-k", type=int, default=5)
    ap.add_argument("--work", type=Path, default=Path("/tmp/marag-bench/recall"))
    args = ap.parse_args()

    from marag.retrieval import open_index
    from marag.types import iter_jsonl

    corpus = args.data_dir / f"{args.dataset}.corpus.jsonl"
    questions = [q for _, q in iter_jsonl(args.data_dir / f"{args.dataset}.questions.jsonl")]
    work = args.work / args.dataset
    rows = []
    for kind in args.kinds.split(","):
        index = open_index(ensure(kind, corpus, work))
        t0 = time.perf_counter()
        hits = index.search_batch([q["question"] for q in questions], args.k)
        secs = time.perf_counter() - t0
        scored = [title_recall(q["supporting_titles"], [p.title for p in h.passages])
                  for q, h in zip(questions, hits, strict=True)]
        recall = sum(r for r, _ in scored) / len(scored)
        full = sum(a for _, a in scored) / len(scored)
        rows.append({"kind": kind, "questions": len(scored), "recall": recall, "all": full, "search_s": secs})
    print(f"\n{args.dataset}: {len(questions)} questions, corpus {corpus.name}, k={args.k}\n")
    print(f"| index | recall@{args.k} (supporting titles) | all titles in top-{args.k} | search s |")
    print("|---|---:|---:|---:|")
    for r in rows:
        print(f"| {r['kind']} | {r['recall']:.3f} | {r['all']:.3f} | {r['search_s']:.2f} |")
    print(json.dumps(rows))


if __name__ == "__main__":
    main()
