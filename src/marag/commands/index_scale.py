"""``marag index import|compress|verify|to-milvus``: indexes at wiki-18 scale.

Import the flat E5 and bm25s indexes users already have, build compressed memory tiers from
a flat file, check vectors against their passages, and move an index into Milvus.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any


def register(isub: Any) -> None:
    m = isub.add_parser(
        "import",
        help="reference an existing faiss flat / bm25s index and its corpus (no re-encoding)",
        description="Import Search-R1's or FlashRAG's wiki-18 indexes: a faiss IndexFlatIP file "
                    "(row i = corpus line i) and/or a bm25s directory, with the corpus (.jsonl, "
                    ".jsonl.gz, or the tar-packed wiki-18.jsonl.gz). The big files are referenced "
                    "in place; a compressed corpus is unpacked once so passages can be read by "
                    "offset.")
    m.add_argument("--corpus", required=True, help="corpus file the index was built from")
    m.add_argument("--faiss", default=None, help="faiss flat index file (e.g. e5_Flat.index)")
    m.add_argument("--bm25", default=None, help="bm25s index directory")
    m.add_argument("--encoder", default=None,
                   help="query encoder the vectors were made with (e.g. intfloat/e5-base-v2)")
    m.add_argument("--out", required=True, help="index directory to create")
    m.add_argument("--query-prefix", default=None, help="default: the encoder family's (E5: 'query: ')")
    m.add_argument("--passage-prefix", default=None, help="default: the family's (E5: 'passage: ')")
    m.add_argument("--pooling", default=None,
                   help="pooling the vectors were made with (mean for E5); checked against the encoder")
    m.add_argument("--any-id-order", action="store_true",
                   help="accept numeric ids that are not line numbers")
    m.add_argument("--skip-encoder-check", action="store_true",
                   help="record the settings without loading the encoder (not on this machine); "
                        "they are checked when the index is opened")
    m.add_argument("--device", default="cpu")
    m.set_defaults(func=run_import)

    c = isub.add_parser("compress", help="build a compressed memory tier from a dense index's flat vectors")
    c.add_argument("dir", help="dense index directory (imported or built)")
    c.add_argument("--tier", required=True, choices=["ivf-sq8", "opq-ivfpq", "opq-ivfpq-fs"])
    c.add_argument("--nlist", type=int, default=None, help="IVF lists (default: power of 2 near sqrt(n))")
    c.add_argument("--pq-m", type=int, default=None, help="PQ sub-quantisers: bytes a vector for opq-ivfpq (default 64 for 768 "
                   "dims), 4 bits each for opq-ivfpq-fs (default 128 for 768 dims)")
    c.add_argument("--train-rows", type=int, default=None, help="rows sampled to train (default 64 x nlist)")
    c.add_argument("--nprobe", type=int, default=None, help="lists probed per query, recorded as default")
    c.add_argument("--rerank", type=int, default=None,
                   help="candidates re-scored exactly from the flat file, recorded as default")
    c.add_argument("--keep-default", action="store_true",
                   help="do not make the new tier the one served by default")
    c.set_defaults(func=run_compress)

    v = isub.add_parser("verify", help="re-encode a sample of passages and compare with their vectors")
    v.add_argument("dir")
    v.add_argument("--sample", type=int, default=16)
    v.add_argument("--min-cosine", type=float, default=0.98)
    v.add_argument("--device", default="cpu")
    v.set_defaults(func=run_verify)

    t = isub.add_parser("to-milvus", help="copy a dense index (vectors + passages) or a BM25 "
                        "index (passages, scored by Milvus' BM25) into a Milvus collection")
    t.add_argument("dir", help="dense or BM25 index directory")
    t.add_argument("--uri", required=True,
                   help="Milvus Lite file (./marag.db) or server URI (http://host:19530)")
    t.add_argument("--collection", default="marag")
    t.add_argument("--index-type", default="FLAT",
                   help="dense: the Milvus index, FLAT, IVF_FLAT, IVF_SQ8, IVF_PQ, HNSW... "
                        "(default FLAT); a BM25 collection gets a sparse inverted index")
    t.add_argument("--nlist", type=int, default=None)
    t.add_argument("--batch", type=int, default=2048, help="rows per insert")
    t.add_argument("--token-env", default=None, help="environment variable holding the token")
    t.add_argument("--overwrite", action="store_true", help="drop an existing collection first")
    t.set_defaults(func=run_to_milvus)


def _say(msg: str) -> None:
    print(msg, file=sys.stderr)


def run_import(args: argparse.Namespace) -> int:
    from marag.retrieval.base import RetrievalError
    from marag.retrieval.imported import import_index

    try:
        report = import_index(
            args.out, args.corpus, faiss_file=args.faiss, bm25_dir=args.bm25,
            encoder=args.encoder, query_prefix=args.query_prefix,
            passage_prefix=args.passage_prefix, pooling=args.pooling,
            ordered_ids=not args.any_id_order, device=args.device,
            check_encoder=not args.skip_encoder_check, log=_say)
    except (ValueError, RetrievalError) as e:
        print(f"marag index import: {e}", file=sys.stderr)
        return 1
    except OSError as e:  # a missing file, or an encoder that cannot be loaded here
        hint = "" if isinstance(e, FileNotFoundError) else (
            " (if the encoder is not on this machine, --skip-encoder-check records the "
            "settings and checks them when the index is opened)")
        print(f"marag index import: {e}{hint}", file=sys.stderr)
        return 1
    mib = report["disk_bytes"] / (1 << 20)
    print(f"imported {report['passages']} passages into {report['out']} "
          f"({', '.join(p['kind'] for p in report['parts'])}); disk used {mib:.1f} MiB"
          + (f" (of which the unpacked corpus {report['unpacked_corpus_bytes'] / (1 << 20):.1f} MiB)"
             if report["unpacked_corpus_bytes"] else "")
          + "; vectors and bm25s files referenced, not copied")
    return 0


def run_compress(args: argparse.Namespace) -> int:
    from marag.retrieval.base import RetrievalError
    from marag.retrieval.imported import compress_index

    try:
        rec = compress_index(args.dir, args.tier, nlist=args.nlist, pq_m=args.pq_m,
                             train_rows=args.train_rows, nprobe=args.nprobe,
                             rerank=args.rerank, make_default=not args.keep_default, log=_say)
    except (FileNotFoundError, ValueError, RetrievalError) as e:
        print(f"marag index compress: {e}", file=sys.stderr)
        return 1
    cost = rec["cost"]
    print(f"built {args.tier} ({rec['spec']}) in {cost['build_seconds']:.1f}s: "
          f"{cost['disk_bytes'] / (1 << 20):.1f} MiB on disk, build peak RSS "
          f"{cost['build_peak_rss_mib']:.0f} MiB")
    return 0


def run_verify(args: argparse.Namespace) -> int:
    from marag.retrieval.base import RetrievalError
    from marag.retrieval.imported import verify_index

    try:
        report = verify_index(args.dir, sample=args.sample, min_cosine=args.min_cosine,
                              device=args.device)
    except (FileNotFoundError, ValueError, RetrievalError) as e:
        print(f"marag index verify: {e}", file=sys.stderr)
        return 1
    print(json.dumps(report))
    if not report["ok"]:
        print(f"marag index verify: {len(report['below_threshold'])} of "
              f"{report['rows_checked']} rows differ from their re-encoded passage (cosine "
              f"< {args.min_cosine}): wrong encoder, prefixes or row order", file=sys.stderr)
        return 1
    return 0


def run_to_milvus(args: argparse.Namespace) -> int:
    from marag.retrieval.base import RetrievalError

    try:
        from marag.retrieval.milvus import index_to_milvus

        report = index_to_milvus(args.dir, args.uri, args.collection, index_type=args.index_type,
                                 nlist=args.nlist, batch=args.batch, token_env=args.token_env,
                                 overwrite=args.overwrite, log=_say)
    except (FileNotFoundError, ValueError, RetrievalError) as e:
        print(f"marag index to-milvus: {e}", file=sys.stderr)
        return 1
    print(f"copied {report['rows']} rows into Milvus collection {args.collection!r} at "
          f"{args.uri} in {report['seconds']:.1f}s ({report['index_type']}, {report['metric']})")
    return 0
