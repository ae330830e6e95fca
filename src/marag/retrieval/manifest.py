"""The on-disk format of an index directory: its manifest, document store and corpus checks.

An index is a directory holding ``manifest.json`` (kind, encoder, corpus path and checksum,
passage count, build time, marag version, parameters), the kind's own files and a ``docs/``
document store. A hybrid index holds a BM25 and a dense index as sub-directories. Every index
kind reads and writes its manifest through this module; which class opens which kind is
:mod:`marag.retrieval.factory`'s business.
"""

from __future__ import annotations

import json
import logging
import os
import time
from pathlib import Path
from typing import Any

from marag.config import INDEX_KINDS
from marag.retrieval.base import RetrievalError
from marag.version import __version__

log = logging.getLogger(__name__)

MANIFEST = "manifest.json"
STORE_DIR = "docs"
FORMAT_VERSION = 1


class BadIndexError(RetrievalError):
    """An index directory that cannot be opened: missing, incomplete or stale."""


def corpus_record(corpus_path: str | os.PathLike[str]) -> dict[str, Any]:
    from marag.corpus import file_checksum

    p = Path(corpus_path)
    if not p.is_file():
        raise FileNotFoundError(f"corpus file not found: {corpus_path}")
    return {"path": str(p.resolve()), **file_checksum(p)}


def write_manifest(
    out: Path,
    kind: str,
    corpus: dict[str, Any],
    count: int,
    build_seconds: float,
    params: dict[str, Any],
    **extra: Any,
) -> dict[str, Any]:
    manifest = {
        "format": FORMAT_VERSION,
        "kind": kind,
        **extra,
        "corpus": corpus,
        "count": count,
        "built_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "build_seconds": round(build_seconds, 3),
        "marag_version": __version__,
        "params": params,
    }
    tmp = out / (MANIFEST + ".tmp")
    tmp.write_text(json.dumps(manifest, indent=2, ensure_ascii=False))
    tmp.replace(out / MANIFEST)  # the manifest appears only once the index is complete
    return manifest


def read_manifest(index_dir: str | os.PathLike[str]) -> dict[str, Any]:
    d = Path(index_dir)
    if not d.exists():
        raise BadIndexError(f"index directory not found: {d}")
    if not d.is_dir():
        raise BadIndexError(f"not an index directory: {d}")
    path = d / MANIFEST
    if not path.is_file():
        raise BadIndexError(f"{d}: no {MANIFEST} (not an index, or its build did not finish)")
    try:
        manifest = json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise BadIndexError(f"{path}: invalid JSON ({e.msg})") from None
    if manifest.get("kind") not in INDEX_KINDS:
        raise BadIndexError(f"{path}: unknown index kind {manifest.get('kind')!r}")
    return manifest


def open_store(index_dir: Path, manifest: dict[str, Any]) -> Any:
    """The passage store of an index: its own ``docs/`` store, or (imported indexes) the
    corpus file itself read by offset."""
    passages = manifest.get("passages") or {}
    if passages.get("store") == "lines":
        from marag.retrieval.linestore import LineStore

        offsets = index_dir / passages["offsets"]
        if not offsets.is_file():
            raise BadIndexError(f"{index_dir}: {passages['offsets']} missing")
        try:
            return LineStore(passages["corpus"], offsets)
        except FileNotFoundError as e:
            raise BadIndexError(f"{index_dir}: {e}") from None
    from marag.corpus import DocStore

    return DocStore(index_dir / STORE_DIR)


def check_corpus(index_dir: Path, manifest: dict[str, Any]) -> None:
    """Refuse an index whose corpus file still exists but has changed since the build."""
    from marag.corpus import checksum_matches

    corpus = manifest.get("corpus") or {}
    path = corpus.get("path")
    if not path or not Path(path).is_file():
        log.debug("%s: corpus %s is gone; serving from the index's own store", index_dir, path)
        return
    if not checksum_matches(path, corpus):
        raise BadIndexError(
            f"{index_dir}: corpus {path} changed since the index was built "
            f"({corpus.get('kind', 'sha256')} checksum mismatch); rebuild the index"
        )
