"""``marag serve-retriever INDEX``: serve an index over HTTP (Search-R1 and MMOA-RAG formats)."""

from __future__ import annotations

import argparse
import sys

from marag.config import INDEX_KINDS


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "serve-retriever",
        help="serve an index over HTTP (POST /retrieve, POST /search, GET /health)",
        description=(
            "Serve a retrieval index over HTTP. POST /retrieve speaks Search-R1's format "
            "({queries, topk, return_scores}), POST /search the MMOA-RAG/MAO-ARAG scripts' "
            "({questions, N}), GET /health reports the index. Binds 127.0.0.1 unless told otherwise."
        ),
    )
    p.add_argument("index", metavar="INDEX", help="index directory, or a built-in corpus such as wiki-demo")
    p.add_argument("--kind", choices=INDEX_KINDS, default="bm25",
                   help="index kind to open or build (default: bm25)")
    p.add_argument("--host", default="127.0.0.1",
                   help="address to bind (default 127.0.0.1; use 0.0.0.0 only on a trusted network)")
    p.add_argument("--port", type=int, default=8000, help="port (default 8000)")
    p.add_argument("--topk", type=int, default=3,
                   help="passages per query when a /retrieve request gives no topk (default 3)")
    p.add_argument("--max-batch", type=int, default=8192,
                   help="most queries in one request; more is a 413 (default 8192, which covers "
                        "Search-R1's GRPO batches: 512 prompts x 5 samples = 2,560 queries)")
    p.add_argument("--max-topk", type=int, default=1000, help="largest topk/N accepted (default 1000)")
    p.add_argument("--max-results", type=int, default=100_000,
                   help="most passages in one response (queries x topk); more is a 413 "
                        "(default 100000)")
    p.add_argument("--max-body-mb", type=float, default=16.0,
                   help="largest request body in MiB; larger is a 413 (default 16)")
    from marag.commands.search import add_tier_options

    add_tier_options(p)
    p.add_argument("--milvus", metavar="URI", default=None,
                   help="serve a Milvus collection instead of a local index: a Milvus Lite file "
                        "or http://host:19530 (INDEX is then the collection name)")
    p.add_argument("--milvus-token-env", default=None,
                   help="environment variable holding the Milvus token")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from marag.config import RetrievalConfig
    from marag.retrieval import RetrievalError, open_retriever
    from marag.retrieval.server import serve

    for name in ("port", "topk", "max_batch", "max_topk", "max_results", "max_body_mb"):
        if getattr(args, name) < 1:
            print(f"marag serve-retriever: --{name.replace('_', '-')} must be at least 1", file=sys.stderr)
            return 2
    try:
        if args.milvus:
            cfg = RetrievalConfig(index=None, kind="dense", backend="milvus",
                                  milvus_uri=args.milvus, collection=args.index,
                                  nprobe=args.nprobe, milvus_token_env=args.milvus_token_env)
        else:
            cfg = RetrievalConfig(index=args.index, kind=args.kind, tier=args.tier,
                                  nprobe=args.nprobe, rerank=args.rerank)
        retriever = open_retriever(cfg)
    except (RetrievalError, OSError) as e:
        print(f"marag serve-retriever: cannot open index {args.index}: {e}", file=sys.stderr)
        return 2
    kind = getattr(retriever, "manifest", {}).get("kind") or retriever.name
    print(f"serving {kind} index {args.index} on http://{args.host}:{args.port} "
          "(POST /retrieve, POST /search, GET /health)", file=sys.stderr)
    try:
        serve(retriever, host=args.host, port=args.port, default_topk=args.topk,
              max_batch=args.max_batch, max_topk=args.max_topk, max_results=args.max_results,
              max_body_bytes=int(args.max_body_mb * (1 << 20)), kind=kind)
    finally:
        retriever.close()
    return 0
