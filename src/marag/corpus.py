"""Passage corpora: streaming readers and an on-disk document store.

Two JSONL layouts are accepted, plain or gzipped:

* FlashRAG / Search-R1 (wiki-18): ``{"id", "contents"}`` where ``contents`` is a quoted
  title line followed by the text (``"Title"\\ntext``);
* ``{"id", "title", "text"}``.

A record whose ``(id, title, text)`` does not rebuild it (an integer id, a ``contents`` title
line without quotes) becomes a ``StoredPassage`` that also keeps the record's own id and
contents, so a server hands them back exactly as the corpus has them.

The document store lets a server fetch passage text by row or id without holding the corpus
in RAM: ``docs.jsonl`` holds one compact JSON record per row, ``offsets.i64`` the byte offset
of every row (memory-mapped), and ``idhash.i64``/``idrow.i64`` the rows sorted by a 64-bit
hash of the id, so an id lookup is a binary search on a memory map plus one verified read.
Duplicate ids are found from the sorted hashes when the store is closed, which costs 16 bytes
per passage instead of a Python set of every id.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from marag.types import Passage, iter_jsonl

log = logging.getLogger(__name__)

STORE_META = "store.json"


@dataclass(slots=True, eq=False)
class StoredPassage(Passage):
    """A Passage that also keeps its corpus record's own ``id`` value and ``contents`` string
    (None when the quoted-title form rebuilds it). It equals, and serialises as, the plain
    Passage with the same id, title and text."""

    source_id: str | int = ""
    source_contents: str | None = None

    @property
    def contents(self) -> str:
        if self.source_contents is not None:
            return self.source_contents
        return f'"{self.title}"\n{self.text}'

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Passage):
            return NotImplemented
        return (self.id, self.title, self.text) == (other.id, other.title, other.text)

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "title": self.title, "text": self.text}


def source_id(p: Passage) -> str | int:
    """The passage's id as its corpus record wrote it (an integer stays an integer)."""
    return p.source_id if isinstance(p, StoredPassage) else p.id


def parse_passage(obj: dict[str, Any], where: str) -> Passage:
    """Turn one corpus record into a Passage; ``where`` (``file:line``) prefixes any error."""
    raw_id = obj.get("id")
    if raw_id is None:
        raise ValueError(f"{where}: missing field 'id'")
    if isinstance(raw_id, bool) or not isinstance(raw_id, (str, int)):
        raise ValueError(f"{where}: field 'id' must be a string, got {type(raw_id).__name__}")
    pid = str(raw_id)  # wiki-18 dumps use integer ids; they are names, not numbers
    if "contents" in obj:
        contents = obj["contents"]
        if not isinstance(contents, str):
            raise ValueError(f"{where}: field 'contents' must be a string")
        title, _, text = contents.partition("\n")
        title = title.strip()
        if len(title) >= 2 and title[0] == '"' and title[-1] == '"':
            title = title[1:-1]
        rebuilt = f'"{title}"\n{text}' == contents
        if rebuilt and raw_id == pid:
            return Passage(pid, title, text)
        return StoredPassage(pid, title, text, raw_id, None if rebuilt else contents)
    if "text" not in obj:
        raise ValueError(f"{where}: missing field 'contents' or 'text'")
    title, text = obj.get("title", ""), obj["text"]
    if not isinstance(text, str):
        raise ValueError(f"{where}: field 'text' must be a string, got {type(text).__name__}")
    if title is None:
        title = ""
    if not isinstance(title, str):
        raise ValueError(f"{where}: field 'title' must be a string, got {type(title).__name__}")
    if raw_id != pid:
        return StoredPassage(pid, title, text, raw_id)
    return Passage(pid, title, text)


def iter_corpus_lines(path: str | os.PathLike[str]) -> Iterator[tuple[int, Passage]]:
    """Stream ``(line_number, Passage)`` from a corpus file (``.gz`` too)."""
    if not Path(path).is_file():
        raise FileNotFoundError(f"corpus file not found: {path}")
    for lineno, obj in iter_jsonl(path):
        yield lineno, parse_passage(obj, f"{path}:{lineno}")


def iter_corpus(path: str | os.PathLike[str], check_duplicates: bool = True) -> Iterator[Passage]:
    """Stream Passages; with ``check_duplicates`` a repeated id raises naming both lines.

    The set of ids costs RAM proportional to the corpus; the document store checks
    duplicates without it, so index builds pass ``check_duplicates=False``.
    """
    seen: dict[str, int] = {}
    for lineno, p in iter_corpus_lines(path):
        if check_duplicates:
            first = seen.setdefault(p.id, lineno)
            if first != lineno:
                raise ValueError(
                    f"{path}: duplicate passage id {p.id!r} on lines {first} and {lineno}"
                )
        yield p


def batched(items: Iterable[Any], size: int) -> Iterator[list[Any]]:
    batch: list[Any] = []
    for x in items:
        batch.append(x)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch


# ----------------------------------------------------------------------------- checksums

FULL_HASH_LIMIT = 1 << 30  # files above 1 GiB get a partial hash: reading 14 GB takes minutes
PARTIAL_CHUNK = 16 << 20


def file_checksum(path: str | os.PathLike[str]) -> dict[str, Any]:
    """``{"kind", "sha256", "size", "mtime"}``.

    ``kind`` is ``sha256`` (whole file) up to 1 GiB, else ``partial-sha256``: the size plus
    the first and last 16 MiB, which catches re-exports and truncation of huge corpora.
    """
    p = Path(path)
    st = p.stat()
    h = hashlib.sha256()
    with open(p, "rb") as f:
        if st.st_size <= FULL_HASH_LIMIT:
            kind = "sha256"
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
        else:
            kind = "partial-sha256"
            h.update(str(st.st_size).encode())
            h.update(f.read(PARTIAL_CHUNK))
            f.seek(st.st_size - PARTIAL_CHUNK)
            h.update(f.read(PARTIAL_CHUNK))
    return {"kind": kind, "sha256": h.hexdigest(), "size": st.st_size, "mtime": st.st_mtime}


def checksum_matches(path: str | os.PathLike[str], recorded: dict[str, Any]) -> bool:
    """Compare a file with a recorded checksum; an unchanged size+mtime skips re-hashing."""
    st = Path(path).stat()
    if st.st_size != recorded.get("size"):
        return False
    if st.st_mtime == recorded.get("mtime"):
        return True
    return file_checksum(path)["sha256"] == recorded.get("sha256")


# ----------------------------------------------------------------------------- doc store


def id_hash(pid: str) -> int:
    digest = hashlib.blake2b(pid.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "little", signed=True)


class DocStoreWriter:
    """Appends passages to a new store; ``close()`` checks ids and writes the lookup tables."""

    def __init__(self, out_dir: str | os.PathLike[str], source: str = "") -> None:
        self.dir = Path(out_dir)
        self.dir.mkdir(parents=True, exist_ok=True)
        (self.dir / STORE_META).unlink(missing_ok=True)  # the store is incomplete until close()
        self.source = source
        self._docs = open(self.dir / "docs.jsonl", "wb")
        self._offsets = open(self.dir / "offsets.i64", "wb")
        self._hashes = open(self.dir / "hashes.tmp", "wb")
        self._lines = open(self.dir / "lines.i64", "wb")
        self._pos = 0
        self.count = 0
        self._offsets.write(np.array([0], dtype=np.int64).tobytes())

    def add(self, passages: list[Passage], linenos: list[int] | None = None) -> None:
        chunk = bytearray()
        offs = np.empty(len(passages), dtype=np.int64)
        hashes = np.empty(len(passages), dtype=np.int64)
        for i, p in enumerate(passages):
            record: list[Any] = [p.id, p.title, p.text]
            if isinstance(p, StoredPassage):  # only then: a plain corpus pays nothing extra
                record += [p.source_id, p.source_contents]
            chunk += json.dumps(record, ensure_ascii=False).encode("utf-8")
            chunk += b"\n"
            offs[i] = self._pos + len(chunk)
            hashes[i] = id_hash(p.id)
        self._docs.write(chunk)
        self._offsets.write(offs.tobytes())
        self._hashes.write(hashes.tobytes())
        if linenos is None:
            linenos = list(range(self.count + 1, self.count + 1 + len(passages)))
        lines = np.asarray(linenos, dtype=np.int64)
        self._lines.write(lines.tobytes())
        self._pos += len(chunk)
        self.count += len(passages)

    def close(self) -> DocStore:
        for f in (self._docs, self._offsets, self._hashes, self._lines):
            f.close()
        hashes = np.fromfile(self.dir / "hashes.tmp", dtype=np.int64)
        order = np.argsort(hashes, kind="stable")
        sorted_h = hashes[order]
        del hashes
        store = DocStore(self.dir, _unchecked=True)
        same = np.flatnonzero(sorted_h[1:] == sorted_h[:-1])
        for j in same:
            a, b = sorted(int(x) for x in (order[j], order[j + 1]))
            pa, pb = store.get(a), store.get(b)
            if pa.id == pb.id:
                la, lb = int(store._lines[a]), int(store._lines[b])
                store.close()
                raise ValueError(
                    f"{self.source or self.dir}: duplicate passage id {pa.id!r} on lines {la} and {lb}"
                )
        store.close()
        sorted_h.tofile(self.dir / "idhash.i64")
        order.astype(np.int64).tofile(self.dir / "idrow.i64")
        (self.dir / "hashes.tmp").unlink()
        meta = {"count": self.count, "bytes": self._pos, "source": self.source}
        (self.dir / STORE_META).write_text(json.dumps(meta, indent=2))
        return DocStore(self.dir)


class DocStore:
    """Read-only passage store; lookups read from memory maps and ``pread`` (thread-safe)."""

    dir: Path

    def __init__(self, store_dir: str | os.PathLike[str], _unchecked: bool = False) -> None:
        self.dir = Path(store_dir)
        meta_path = self.dir / STORE_META
        if not _unchecked and not meta_path.is_file():
            raise FileNotFoundError(f"{self.dir}: not a complete document store (no {STORE_META})")
        self._fd = os.open(self.dir / "docs.jsonl", os.O_RDONLY)
        self._offsets = _memmap_or_empty(self.dir / "offsets.i64")
        self._lines = _memmap_or_empty(self.dir / "lines.i64")
        self.count = len(self._offsets) - 1
        if not _unchecked:
            self._hash = _memmap_or_empty(self.dir / "idhash.i64")
            self._rows = _memmap_or_empty(self.dir / "idrow.i64")

    def __len__(self) -> int:
        return self.count

    def __del__(self) -> None:
        self.close()

    def close(self) -> None:
        fd = getattr(self, "_fd", None)
        if fd is not None:
            os.close(fd)
            self._fd = None

    def get(self, row: int) -> Passage:
        if not 0 <= row < self.count:
            raise IndexError(f"row {row} out of range (store has {self.count} passages)")
        start, end = int(self._offsets[row]), int(self._offsets[row + 1])
        return _passage(json.loads(os.pread(self._fd, end - start, start)))

    def get_many(self, rows: Iterable[int]) -> list[Passage]:
        rows = np.fromiter(rows, dtype=np.int64)
        if len(rows) and (rows.min() < 0 or rows.max() >= self.count):
            bad = rows[(rows < 0) | (rows >= self.count)][0]
            raise IndexError(f"row {bad} out of range (store has {self.count} passages)")
        starts, ends = self._offsets[rows].tolist(), self._offsets[rows + 1].tolist()
        out = []
        for a, b in zip(starts, ends, strict=True):
            out.append(_passage(json.loads(os.pread(self._fd, b - a, a))))
        return out

    def row_of(self, pid: str) -> int:
        """Row of a passage id; KeyError when absent."""
        h = id_hash(pid)
        i = int(np.searchsorted(self._hash, h))
        while i < len(self._hash) and self._hash[i] == h:
            row = int(self._rows[i])
            if self.get(row).id == pid:
                return row
            i += 1
        raise KeyError(pid)

    def get_by_id(self, pid: str) -> Passage:
        return self.get(self.row_of(pid))

    def iter_batches(self, batch_size: int, start: int = 0) -> Iterator[tuple[int, list[Passage]]]:
        for lo in range(start, self.count, batch_size):
            yield lo, self.get_many(range(lo, min(lo + batch_size, self.count)))


def _passage(record: list[Any]) -> Passage:
    # ``[id, title, text]``, or with the record's own id and contents appended
    return Passage(*record) if len(record) == 3 else StoredPassage(*record)


def _memmap_or_empty(path: Path) -> np.ndarray:
    # numpy cannot memory-map an empty file; an empty corpus is legal (if useless)
    if path.stat().st_size == 0:
        return np.empty(0, dtype=np.int64)
    # a plain ndarray view: element access on np.memmap objects is several times slower
    return np.memmap(path, dtype=np.int64, mode="r").view(np.ndarray)


def build_store(
    corpus_path: str | os.PathLike[str],
    out_dir: str | os.PathLike[str],
    batch_size: int = 4096,
    on_batch: Any = None,
    show_progress: bool = True,
) -> DocStore:
    """Stream a corpus file into a document store.

    ``on_batch(start_row, passages)`` sees every batch as it is written, so an index builder
    can tokenise in the same pass over the file.
    """
    from tqdm import tqdm

    writer = DocStoreWriter(out_dir, source=str(corpus_path))
    bar = tqdm(desc=f"reading {Path(corpus_path).name}", unit=" passages", disable=not show_progress)
    try:
        for batch in batched(iter_corpus_lines(corpus_path), batch_size):
            linenos = [n for n, _ in batch]
            passages = [p for _, p in batch]
            start = writer.count
            writer.add(passages, linenos)
            if on_batch is not None:
                on_batch(start, passages)
            bar.update(len(passages))
    finally:
        bar.close()
    return writer.close()
