"""Passages read by byte offset from the corpus file itself, for imported indexes.

An imported wiki-18 index keeps the corpus where the user has it: ``offsets.i64`` holds the
byte offset of every passage line (row i = i-th non-blank line = row i of the vectors), and a
lookup is one ``pread`` of that line. Nothing of the corpus stays in RAM but the memory-mapped
offsets (8 bytes a passage). A compressed corpus (``.jsonl.gz``, or Search-R1's tar-packed
``wiki-18.jsonl.gz``) cannot be read at an offset, so it is unpacked once, streaming, into a
plain JSONL next to the index; that is the only copy an import makes.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from marag.corpus import parse_passage
from marag.types import Passage, open_payload, sniff

OFFSETS_FILE = "offsets.i64"
_NUMERIC = re.compile(rb"-?\d+")


@dataclass(slots=True)
class LineScan:
    """What one pass over a corpus found: passage count and how its ids run."""

    count: int
    first_id: str | None
    sequential_from: int | None  # ids are base, base+1, ... in line order (None: they are not)
    first_out_of_order: str | None  # "line L has id X, expected Y" when numeric ids break order


def plain_corpus(corpus: str | os.PathLike[str], out_dir: Path) -> tuple[Path, int]:
    """A plain-JSONL path for the corpus and the bytes written to make it (0: used in place)."""
    kind = sniff(corpus)
    if kind == "plain":
        return Path(corpus).resolve(), 0
    target = out_dir / "corpus.jsonl"
    tmp = target.with_name(target.name + ".tmp")
    with open_payload(corpus) as src, open(tmp, "wb") as dst:
        shutil.copyfileobj(src, dst, 16 << 20)
    tmp.replace(target)
    return target.resolve(), target.stat().st_size


def scan_lines(corpus: Path, offsets_path: Path, block: int = 1 << 16) -> LineScan:
    """Write the offset of every non-blank line (plus the end) and check every line parses as
    a passage; a broken line raises ValueError naming file and line."""
    count, first_id, base, broken = 0, None, None, None
    sequential = True
    pos = 0
    buf = np.empty(block, dtype=np.int64)
    fill = 0
    with open(corpus, "rb") as f, open(offsets_path, "wb") as out:
        for lineno, line in enumerate(f, 1):
            start, pos = pos, pos + len(line)
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as e:
                raise ValueError(f"{corpus}:{lineno}: invalid JSON ({e.msg})") from None
            if not isinstance(obj, dict):
                raise ValueError(f"{corpus}:{lineno}: expected a JSON object")  # noqa: TRY004
            pid = parse_passage(obj, f"{corpus}:{lineno}").id
            if first_id is None:
                first_id = pid
                base = int(pid) if _NUMERIC.fullmatch(pid.encode()) else None
                sequential = base is not None
            elif sequential and (not _NUMERIC.fullmatch(pid.encode()) or int(pid) != base + count):
                sequential = False
                broken = f"line {lineno} has id {pid!r}, expected {base + count}"
            buf[fill] = start
            fill += 1
            count += 1
            if fill == block:
                out.write(buf.tobytes())
                fill = 0
        buf[fill] = pos
        out.write(buf[: fill + 1].tobytes())
    return LineScan(count, first_id, base if sequential else None, broken)


class LineStore:
    """Read-only passages by row from a plain JSONL file and its offsets (thread-safe)."""

    def __init__(self, corpus: str | os.PathLike[str], offsets: str | os.PathLike[str]) -> None:
        self.path = Path(corpus)
        if not self.path.is_file():
            raise FileNotFoundError(f"corpus file not found: {corpus} (an imported index "
                                    "reads passage text from it; re-import if it moved)")
        self._fd = os.open(self.path, os.O_RDONLY)
        self._offsets = np.memmap(offsets, dtype=np.int64, mode="r").view(np.ndarray)
        self.count = len(self._offsets) - 1

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
        return self.get_many([row])[0]

    def get_many(self, rows: Iterable[int]) -> list[Passage]:
        rows = np.fromiter(rows, dtype=np.int64)
        if len(rows) and (rows.min() < 0 or rows.max() >= self.count):
            bad = rows[(rows < 0) | (rows >= self.count)][0]
            raise IndexError(f"row {bad} out of range (corpus has {self.count} passages)")
        out = []
        for a, b, row in zip(self._offsets[rows].tolist(), self._offsets[rows + 1].tolist(),
                             rows.tolist(), strict=True):
            line = os.pread(self._fd, b - a, a)
            out.append(parse_passage(json.loads(line), f"{self.path}, row {row}"))
        return out

    def iter_batches(self, batch_size: int, start: int = 0) -> Iterator[tuple[int, list[Passage]]]:
        for lo in range(start, self.count, batch_size):
            yield lo, self.get_many(range(lo, min(lo + batch_size, self.count)))
