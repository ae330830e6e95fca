"""``marag search INDEX "query"``: top-k passages from a built index (or wiki-demo)."""

from __future__ import annotations

import argparse
import json
import sys
import textwrap
from typing import Any

from marag.config import INDEX_KINDS


def register(sub: Any) -> None:
    p = sub.add_parser("search", help="search an index")
    p.add_argument("index", help="index directory, or 'wiki-demo'")
    p.add_argument("query", nargs="+", help="one or more queries")
    p.add_argument("-k", type=int, default=5, help="passages per query")
    p.add_argument("--kind", choices=INDEX_KINDS, default="bm25",
                   help="which wiki-demo index (when INDEX is wiki-demo)")
    p.add_argument("--json", action="store_true", help="print Hits as JSON, one line per query")
    p.add_argument("--width", type=int, default=100, help="snippet width")
    add_tier_options(p)
    p.set_defaults(func=run)


def add_tier_options(p: argparse.ArgumentParser) -> None:
    """How a dense index searches: retrieval.tier, retrieval.nprobe, retrieval.rerank."""
    p.add_argument("--tier", choices=["flat-mmap", "ivf-sq8", "opq-ivfpq", "opq-ivfpq-fs"], default=None,
                   help="memory tier of a dense index (default: the one its manifest names)")
    p.add_argument("--nprobe", type=int, default=None, help="IVF lists probed per query")
    p.add_argument("--rerank", type=int, default=None,
                   help="candidates re-scored exactly from the flat vectors (0: none)")


def run(args: argparse.Namespace) -> int:
    from marag.retrieval import RetrievalError
    from marag.retrieval.factory import index_dir, open_index

    if args.k < 1:
        print("marag search: -k must be at least 1", file=sys.stderr)
        return 2
    try:
        retriever = open_index(index_dir(args.index, args.kind), tier=args.tier,
                               nprobe=args.nprobe, rerank=args.rerank)
        hits = retriever.search_batch(list(args.query), args.k)
    except (RetrievalError, FileNotFoundError) as e:
        print(f"marag search: {e}", file=sys.stderr)
        return 1
    for h in hits:
        if args.json:
            print(json.dumps(h.to_dict(), ensure_ascii=False))
            continue
        print(f"query: {h.query}")
        for rank, (p, s) in enumerate(zip(h.passages, h.scores, strict=True), 1):
            snippet = textwrap.shorten(p.text, width=args.width, placeholder=" ...")
            print(f"{rank:>3}  {s:8.4f}  {p.id}  {p.title}")
            print(f"     {snippet}")
        if len(hits) > 1:
            print()
    retriever.close()
    return 0
