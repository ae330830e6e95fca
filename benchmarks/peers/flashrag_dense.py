"""FlashRAG's dense retriever in its own venv, timed in process (FlashRAG has no server).

    PEERENV/bin/python benchmarks/peers/cpu_launch.py benchmarks/peers/flashrag_dense.py \
        --index W/flat.index --corpus W/corpus.jsonl --encoder DIR --queries Q.json \
        [--single 50] [--batch 2560] [--k 3]

Builds ``flashrag.retriever.retriever.DenseRetriever`` as FlashRAG's config would (E5 name,
mean pooling, fp16 as its default unless ``--no-fp16``, batch 256, no cache, no re-ranker),
then: load time, one query at a time (``search``), one ``batch_search`` of the whole batch,
and the encoder alone on the same batch. Prints one JSON object with its own RSS. Needs
FlashRAG after 0.1.2: 0.1.2's ``Encoder.encode`` calls ``parse_query`` without its
``instruction`` argument, so its dense retrieval fails with a TypeError on every query.
"""

import argparse
import json
import resource
import statistics
import time


def rss_mib() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--index", required=True)
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--encoder", required=True)
    ap.add_argument("--queries", required=True)
    ap.add_argument("--single", type=int, default=50)
    ap.add_argument("--batch", type=int, default=2560)
    ap.add_argument("--k", type=int, default=3)
    ap.add_argument("--fp16", action=argparse.BooleanOptionalAction, default=True)
    args = ap.parse_args()
    with open(args.queries, encoding="utf-8") as f:
        queries = json.load(f)
    t0 = time.perf_counter()
    from flashrag.retriever.retriever import DenseRetriever
    from flashrag.version import __version__

    config = {
        "retrieval_method": "e5", "retrieval_topk": args.k, "index_path": args.index,
        "corpus_path": args.corpus, "save_retrieval_cache": False, "use_retrieval_cache": False,
        "retrieval_cache_path": None, "use_reranker": False, "faiss_gpu": False,
        "retrieval_batch_size": 256, "instruction": None, "use_sentence_transformer": False,
        "retrieval_model_path": args.encoder, "retrieval_pooling_method": "mean",
        "retrieval_query_max_length": 128, "retrieval_use_fp16": args.fp16,
        "save_dir": "/tmp", "silent_retrieval": True,
    }
    retriever = DenseRetriever(config)
    load_s = time.perf_counter() - t0
    retriever.search(queries[0], num=args.k)  # warm-up
    lat = []
    for q in queries[1 : 1 + args.single]:
        t1 = time.perf_counter()
        retriever.search(q, num=args.k)
        lat.append(time.perf_counter() - t1)
    batch = queries[: args.batch]
    t2 = time.perf_counter()
    results = retriever.batch_search(batch, num=args.k)
    batch_s = time.perf_counter() - t2
    t3 = time.perf_counter()
    for lo in range(0, len(batch), 256):
        retriever.encoder.encode(batch[lo : lo + 256])
    encode_s = time.perf_counter() - t3
    rss = rss_mib()
    lat.sort()
    print(json.dumps({
        "load_s": round(load_s, 2), "single": len(lat),
        "p50_ms": round(1000 * statistics.median(lat), 1),
        "p99_ms": round(1000 * lat[min(len(lat) - 1, int(0.99 * len(lat)))], 1),
        "batch": len(batch), "batch_s": round(batch_s, 2), "encode_s": round(encode_s, 2),
        "first_ids": [str(d.get("id")) for d in results[0]], "fp16": args.fp16,
        "flashrag": __version__, "rss_mib": round(rss),
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
    }))


if __name__ == "__main__":
    main()
