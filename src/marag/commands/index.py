"""``marag index build|info|import|compress|verify|to-milvus``."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from marag.config import INDEX_KINDS


def register(sub: Any) -> None:
    p = sub.add_parser("index", help="build or inspect a retrieval index")
    isub = p.add_subparsers(dest="index_command", metavar="SUBCOMMAND", required=True)

    b = isub.add_parser("build", help="index a corpus (JSONL, .gz ok) or the built-in wiki-demo")
    b.add_argument("--corpus", required=True, help="corpus file, or 'wiki-demo'")
    b.add_argument("--out", required=True, help="index directory to create")
    b.add_argument("--kind", choices=INDEX_KINDS, default="bm25")
    b.add_argument("--encoder", default=None, help="dense encoder (default all-MiniLM-L6-v2)")
    b.add_argument("--faiss", choices=["flat", "hnsw", "ivf"], default="flat")
    b.add_argument("--batch-size", type=int, default=None)
    b.add_argument("--nlist", type=int, default=None, help="IVF lists (default ~4*sqrt(n))")
    b.add_argument("--nprobe", type=int, default=None, help="IVF lists searched per query")
    b.add_argument("--device", default=None, help="encoder device (cpu, cuda)")
    b.add_argument("--no-progress", action="store_true", help="no progress bars")
    b.set_defaults(func=run_build)

    i = isub.add_parser("info", help="print an index's manifest")
    i.add_argument("dir", help="index directory, or 'wiki-demo'")
    i.add_argument("--kind", choices=INDEX_KINDS, default="bm25",
                   help="which wiki-demo index (when DIR is wiki-demo)")
    i.set_defaults(func=run_info)

    from marag.commands import index_scale

    index_scale.register(isub)


def run_build(args: argparse.Namespace) -> int:
    from marag.retrieval import build_index

    corpus = args.corpus
    if corpus == "wiki-demo":
        from marag.retrieval.demo import demo_corpus

        corpus = demo_corpus()
    params: dict[str, Any] = {}
    for name in ("nlist", "nprobe", "device"):
        if getattr(args, name) is not None:
            params[name] = getattr(args, name)
    try:
        out = build_index(
            corpus, args.out, kind=args.kind, encoder=args.encoder, faiss_type=args.faiss,
            batch_size=args.batch_size, show_progress=not args.no_progress, **params,
        )
    except (FileNotFoundError, ValueError) as e:
        print(f"marag index build: {e}", file=sys.stderr)
        return 1
    from marag.retrieval.manifest import read_manifest

    m = read_manifest(out)
    print(f"built {m['kind']} index of {m['count']} passages in {m['build_seconds']:.1f}s: {out}")
    return 0


def run_info(args: argparse.Namespace) -> int:
    from marag.retrieval.factory import index_dir
    from marag.retrieval.manifest import BadIndexError, read_manifest

    try:
        manifest = read_manifest(index_dir(args.dir, args.kind))
    except BadIndexError as e:
        print(f"marag index info: {e}", file=sys.stderr)
        return 1
    print(json.dumps(manifest, indent=2, ensure_ascii=False))
    return 0
