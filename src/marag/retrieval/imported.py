"""Import indexes users already have (Search-R1's and FlashRAG's wiki-18), compress and verify.

``import_index`` references a faiss flat file (row i = corpus line i) and/or a bm25s index
directory in place: nothing is re-encoded and the big files are neither copied nor loaded
(a bm25s matrix is read through once, streamed, to store each term's bound for MaxScore).
It checks that the corpus has one passage per vector row (ids in line order where they are
numbers), that the encoder makes vectors of the file's dimension and pools as stated, and
records the query encoder's settings. ``compress_index`` adds a compressed tier built by
streaming the flat file; ``verify_index`` re-encodes a sample of passages and compares them
with their rows, which catches a wrong encoder, wrong prefixes or shifted rows.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from marag.jax_tf import import_bm25s
from marag.retrieval.encoding import (
    EncoderMismatch,
    EncoderSettings,
    check_model,
    settings_for,
    stated_settings,
)
from marag.retrieval.manifest import MANIFEST, BadIndexError, corpus_record, read_manifest
from marag.retrieval.tiers import COMPRESSED, build_tier
from marag.retrieval.vectors import VectorFile, read_npy, read_vector_file

OFFSETS = "offsets.i64"


class ImportError_(ValueError):  # "ImportError" is a builtin
    """An index that cannot be imported as given; the message says what does not line up."""


def _write(out: Path, manifest: dict[str, Any]) -> None:
    tmp = out / (MANIFEST + ".tmp")
    tmp.write_text(json.dumps(manifest, indent=2, ensure_ascii=False))
    tmp.replace(out / MANIFEST)


def _base_manifest(kind: str, corpus: dict[str, Any], count: int, seconds: float) -> dict[str, Any]:
    from marag.version import __version__

    return {"format": 1, "kind": kind, "corpus": corpus, "count": count,
            "built_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "build_seconds": round(seconds, 3), "marag_version": __version__}


def _disk(paths: list[Path]) -> int:
    return sum(p.stat().st_size for p in paths if p.is_file() and not p.is_symlink())


def import_index(
    out_dir: str | os.PathLike[str],
    corpus: str | os.PathLike[str],
    faiss_file: str | os.PathLike[str] | None = None,
    bm25_dir: str | os.PathLike[str] | None = None,
    encoder: str | None = None,
    query_prefix: str | None = None,
    passage_prefix: str | None = None,
    pooling: str | None = None,
    normalize: bool = True,
    ordered_ids: bool = True,
    device: str = "cpu",
    check_encoder: bool = True,
    log: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Import into ``out_dir`` and return a report (parts written, passages, disk used).

    ``check_encoder=False`` records the stated settings without loading the encoder (it is
    not on this machine); opening the index checks them then.
    """
    from marag.retrieval.linestore import plain_corpus, scan_lines

    if faiss_file is None and bm25_dir is None:
        raise ImportError_("nothing to import: give a faiss flat file, a bm25s directory or both")
    t0 = time.perf_counter()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / MANIFEST).unlink(missing_ok=True)
    vf = read_vector_file(faiss_file) if faiss_file is not None else None
    if bm25_dir is not None and not (Path(bm25_dir) / "params.index.json").is_file():
        raise ImportError_(f"{bm25_dir}: not a bm25s index directory (no params.index.json)")
    record = corpus_record(corpus)
    if log:
        log(f"scanning {corpus}")
    plain, unpacked = plain_corpus(corpus, out)
    scan = scan_lines(plain, out / OFFSETS)
    if scan.count == 0:
        raise ImportError_(f"{corpus}: corpus has no passages")
    if ordered_ids and scan.first_out_of_order:
        raise ImportError_(
            f"{corpus}: numeric ids out of line order ({scan.first_out_of_order}); a flat "
            "index's row i is the corpus's line i, so this corpus is not the one the index was "
            "built from, or was re-sorted. Pass --any-id-order if its ids are not line numbers.")
    passages = {"store": "lines", "corpus": str(plain), "offsets": OFFSETS,
                "unpacked_bytes": unpacked}
    report: dict[str, Any] = {"passages": scan.count, "out": str(out), "parts": []}
    written = [out / OFFSETS] + ([plain] if unpacked else [])
    parts: dict[str, Path] = {}
    if vf is not None:
        if vf.rows != scan.count:
            raise ImportError_(f"{faiss_file} holds {vf.rows} vectors but {corpus} has "
                               f"{scan.count} passages: row i must be passage i")
        if check_encoder:
            from marag.retrieval.dense import load_encoder

            model = load_encoder(encoder, device)
            try:
                settings = settings_for(model, encoder, vf.dim, vf.metric, query_prefix,
                                        passage_prefix, pooling, normalize)
            except EncoderMismatch as e:
                raise ImportError_(f"{faiss_file}: {e}") from None
        else:
            settings = stated_settings(encoder, vf.dim, vf.metric, query_prefix,
                                       passage_prefix, pooling, normalize)
        dense = out / "dense" if bm25_dir is not None else out
        dense.mkdir(exist_ok=True)
        manifest = _base_manifest("dense", record, scan.count, time.perf_counter() - t0)
        manifest.update({
            "encoder": settings.name, "dim": vf.dim, "query_prefix": settings.query_prefix,
            "passage_prefix": settings.passage_prefix, "query_encoder": settings.to_dict(),
            "vectors": vf.to_dict(), "passages": _rel_store(passages, out, dense),
            "tiers": {"flat-mmap": {"file": None, "params": {}, "cost": {
                "disk_bytes": 0, "how": "reads the referenced flat file in place"}}},
            "default_tier": "flat-mmap",
            "params": {"faiss": "flat-mmap", "metric": vf.metric,
                       "normalize": settings.normalize, "imported_from": vf.path},
        })
        _write(dense, manifest)
        parts["dense"] = dense
        report["parts"].append({"kind": "dense", "dir": str(dense), "vectors": vf.path,
                                "rows": vf.rows, "dim": vf.dim})
    if bm25_dir is not None:
        parts["bm25"] = _import_bm25(out / "bm25" if vf is not None else out, Path(bm25_dir),
                                     record, scan.count, passages, out, t0)
        from marag.retrieval.bm25 import BOUNDS_FILE

        written.append(parts["bm25"] / BOUNDS_FILE)
        report["parts"].append({"kind": "bm25", "dir": str(parts["bm25"]),
                                "bm25s": str(Path(bm25_dir).resolve())})
    if len(parts) == 2:
        from marag.retrieval.hybrid import make_hybrid

        make_hybrid(out, parts["bm25"], parts["dense"], build_seconds=time.perf_counter() - t0)
    written += [p / MANIFEST for p in parts.values()] + [out / MANIFEST]
    report["disk_bytes"] = _disk(list(dict.fromkeys(written)))
    report["unpacked_corpus_bytes"] = unpacked
    report["seconds"] = round(time.perf_counter() - t0, 2)
    return report


def _rel_store(passages: dict[str, Any], out: Path, part: Path) -> dict[str, Any]:
    """The store record as seen from a part directory (the offsets live in ``out``)."""
    rel = os.path.relpath(out / passages["offsets"], part)
    return {**passages, "offsets": rel}


def _import_bm25(part: Path, src: Path, record: dict[str, Any], count: int,
                 passages: dict[str, Any], out: Path, t0: float) -> Path:
    bm25s = import_bm25s()

    from marag.retrieval.bm25 import BM25_DIR, BOUNDS_FILE, write_bounds

    part.mkdir(parents=True, exist_ok=True)
    model = bm25s.BM25.load(str(src), mmap=True, show_progress=False)
    n = int(model.scores["num_docs"])
    if n != count:
        raise ImportError_(f"{src}: bm25s index holds {n} documents but the corpus has "
                           f"{count} passages: document i must be passage i")
    link = part / BM25_DIR
    for stale in (part / MANIFEST, part / BOUNDS_FILE):  # of an earlier import here
        stale.unlink(missing_ok=True)
    if link.is_symlink() or link.exists():
        link.unlink()
    link.symlink_to(src.resolve(), target_is_directory=True)  # referenced, never copied
    # each term's bound for MaxScore, in one streamed read of the matrix (its pages are read
    # once, nothing is copied; a few bytes per term are written)
    write_bounds(part, model.scores)
    manifest = _base_manifest("bm25", record, count, time.perf_counter() - t0)
    manifest.update({
        "passages": _rel_store(passages, out, part),
        "params": {"k1": model.k1, "b": model.b, "method": model.method,
                   "tokenizer": "bm25s+PyStemmer-english+stopwords-en",
                   "imported_from": str(src.resolve())},
    })
    _write(part, manifest)
    return part


def as_tiered(index_dir: Path, manifest: dict[str, Any], device: str = "cpu") -> dict[str, Any]:
    """A marag-built dense index's manifest, extended to reference its own vectors."""
    if "vectors" in manifest:
        return manifest
    from marag.retrieval.dense import EMB_FILE, load_encoder

    vf = read_npy(index_dir / EMB_FILE)
    model = load_encoder(manifest["encoder"], device)
    settings = settings_for(model, manifest["encoder"], vf.dim, "inner_product",
                            manifest.get("query_prefix", ""), manifest.get("passage_prefix", ""))
    return {**manifest, "vectors": vf.to_dict(), "query_encoder": settings.to_dict(),
            "tiers": {"flat-mmap": {"file": None, "params": {}, "cost": {"disk_bytes": 0}}},
            "default_tier": "flat-mmap"}


def compress_index(
    index_dir: str | os.PathLike[str],
    tier: str,
    nlist: int | None = None,
    pq_m: int | None = None,
    train_rows: int | None = None,
    nprobe: int | None = None,
    rerank: int | None = None,
    make_default: bool = True,
    log: Callable[[str], None] | None = None,
    rows: Any | None = None,
) -> dict[str, Any]:
    """Build ``tier`` of a dense index from its flat vectors; returns the tier's record.
    ``rows``: the vectors to compress instead of reading the flat file (an object with the
    flat reader's ``len``, ``shape``, ``take`` and ``block``, the same count and dimension):
    the scale benchmark's generator, where the flat file is a hole of its size."""
    if tier not in COMPRESSED:
        raise ValueError(f"unknown tier {tier!r} (choose from {', '.join(COMPRESSED)})")
    d = Path(index_dir)
    manifest = read_manifest(d)
    if manifest["kind"] != "dense":
        raise BadIndexError(f"{d}: a {manifest['kind']} index has no vectors to compress")
    manifest = as_tiered(d, manifest)
    vf = VectorFile.from_dict(manifest["vectors"])
    vf.check_unchanged(manifest["vectors"])
    (d / "tiers").mkdir(exist_ok=True)
    out_file = d / "tiers" / f"{tier}.faiss"
    if rows is not None and tuple(rows.shape) != (vf.rows, vf.dim):
        raise ValueError(f"rows {tuple(rows.shape)} do not match the flat file's "
                         f"({vf.rows}, {vf.dim})")
    rec = build_tier(vf.reader() if rows is None else rows, vf.metric, tier, out_file,
                     nlist=nlist, pq_m=pq_m, train_rows=train_rows, log=log)
    rec["file"] = f"tiers/{out_file.name}"
    if nprobe is not None:
        rec["params"]["nprobe"] = nprobe
    if rerank is not None:
        rec["params"]["rerank"] = rerank
    manifest.setdefault("tiers", {})[tier] = rec
    if make_default:
        manifest["default_tier"] = tier
    _write(d, manifest)
    return rec


def verify_index(index_dir: str | os.PathLike[str], sample: int = 16, seed: int = 0,
                 min_cosine: float = 0.98, device: str = "cpu") -> dict[str, Any]:
    """Re-encode ``sample`` passages and compare each with its row of the flat vectors."""
    from marag.retrieval.dense import load_encoder, passage_text
    from marag.retrieval.manifest import open_store

    d = Path(index_dir)
    manifest = read_manifest(d)
    if "vectors" not in manifest:
        raise BadIndexError(f"{d}: not an imported or compressed dense index")
    vf = VectorFile.from_dict(manifest["vectors"])
    settings = EncoderSettings.from_dict(manifest["query_encoder"])
    model = load_encoder(settings.name, device)
    check_model(model, settings)
    store = open_store(d, manifest)
    try:
        if len(store) != vf.rows:
            raise BadIndexError(f"{d}: {len(store)} passages but {vf.rows} vectors")
        rng = np.random.default_rng(seed)
        rows = np.sort(rng.choice(vf.rows, size=min(sample, vf.rows), replace=False))
        texts = [passage_text(p, settings.passage_prefix) for p in store.get_many(rows)]
    finally:
        store.close()
    fresh = model.encode(texts, normalize_embeddings=True, convert_to_numpy=True,
                         show_progress_bar=False)
    stored = vf.open()[rows].astype(np.float32)
    stored /= np.maximum(np.linalg.norm(stored, axis=1, keepdims=True), 1e-12)
    cos = np.sum(stored * fresh, axis=1)
    bad = [int(r) for r, c in zip(rows, cos, strict=True) if c < min_cosine]
    return {"rows_checked": len(rows), "min_cosine": float(cos.min()),
            "mean_cosine": float(cos.mean()), "below_threshold": bad, "ok": not bad,
            "threshold": min_cosine}
