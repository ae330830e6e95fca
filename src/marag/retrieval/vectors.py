"""Flat vector files read in place: a faiss ``IndexFlatIP``/``IndexFlatL2`` file or a ``.npy``.

A faiss flat file is a 45-byte header (fourcc ``IxFI`` or ``IxF2``, dimension, row count,
two placeholders, trained flag, metric, then the size of the code array) followed by the
float32 rows, row i right after row i-1. So the 64.6 GB E5 index of wiki-18 can be
memory-mapped and searched block by block, or streamed into a compressed tier, without
faiss ever loading it. Nothing here imports faiss.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

FLAT_FOURCC = {b"IxFI": "inner_product", b"IxF2": "l2"}
# fourcc, d (i32), ntotal (i64), two placeholders (i64), is_trained (u8), metric (i32),
# then the code array's length in floats (u64)
_HEADER = struct.Struct("<4siqqqBiQ")


class VectorFileError(ValueError):
    """A vector file that is not what it claims to be (layout, size or metric)."""


@dataclass(frozen=True, slots=True)
class VectorFile:
    """Where the float32 rows of a flat vector file lie: ``rows`` x ``dim`` from ``offset``."""

    path: str
    format: str  # "faiss-flat" or "npy"
    offset: int
    rows: int
    dim: int
    metric: str  # "inner_product" or "l2"

    def to_dict(self) -> dict[str, Any]:
        st = os.stat(self.path)
        return {"path": self.path, "format": self.format, "offset": self.offset,
                "rows": self.rows, "dim": self.dim, "metric": self.metric, "dtype": "float32",
                "size": st.st_size, "mtime": st.st_mtime}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> VectorFile:
        return cls(d["path"], d["format"], int(d["offset"]), int(d["rows"]), int(d["dim"]),
                   d.get("metric", "inner_product"))

    def check_unchanged(self, recorded: dict[str, Any]) -> None:
        """Refuse a vector file whose size changed since it was recorded."""
        p = Path(self.path)
        if not p.is_file():
            raise VectorFileError(f"vector file {self.path} is gone")
        if p.stat().st_size != recorded.get("size"):
            raise VectorFileError(f"vector file {self.path} changed size since it was recorded "
                                  f"({recorded.get('size')} -> {p.stat().st_size} bytes)")

    def reader(self) -> VectorReader:
        return VectorReader(self)

    def open(self) -> np.ndarray:
        """The rows as a read-only memory map (a plain ndarray view: nothing is read yet)."""
        if self.rows == 0:
            return np.empty((0, self.dim), np.float32)
        mm = np.memmap(self.path, dtype=np.float32, mode="r", offset=self.offset,
                       shape=(self.rows, self.dim))
        return mm.view(np.ndarray)


def read_faiss_flat(path: str | os.PathLike[str]) -> VectorFile:
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"faiss index file not found: {path}")
    size = p.stat().st_size
    with open(p, "rb") as f:
        head = f.read(_HEADER.size)
    if len(head) < 4 or head[:4] not in FLAT_FOURCC:
        got = head[:4].decode("latin-1") if head else "an empty file"
        raise VectorFileError(
            f"{path}: not a faiss flat index (fourcc {got!r}; expected IxFI for IndexFlatIP "
            "or IxF2 for IndexFlatL2). Import the flat index the compressed tiers are built from."
        )
    if len(head) < _HEADER.size:
        raise VectorFileError(f"{path}: truncated faiss header ({size} bytes)")
    fourcc, dim, ntotal, _, _, _, _, n_floats = _HEADER.unpack(head)
    if dim <= 0 or ntotal < 0 or n_floats != dim * ntotal:
        raise VectorFileError(f"{path}: inconsistent faiss flat header (d={dim}, "
                              f"ntotal={ntotal}, codes={n_floats} floats)")
    expected = _HEADER.size + 4 * n_floats
    if size < expected:
        raise VectorFileError(f"{path}: file holds {size} bytes but its header promises "
                              f"{ntotal} rows x {dim} dims = {expected} bytes (truncated copy?)")
    return VectorFile(str(p.resolve()), "faiss-flat", _HEADER.size, int(ntotal), int(dim),
                      FLAT_FOURCC[fourcc])


def read_npy(path: str | os.PathLike[str], metric: str = "inner_product") -> VectorFile:
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"vector file not found: {path}")
    with open(p, "rb") as f:
        try:
            major, _ = np.lib.format.read_magic(f)
            read = (np.lib.format.read_array_header_1_0 if major == 1
                    else np.lib.format.read_array_header_2_0)
            shape, fortran, dtype = read(f)
        except ValueError as e:
            raise VectorFileError(f"{path}: not a .npy file ({e})") from None
        offset = f.tell()
    if dtype != np.float32 or fortran or len(shape) != 2:
        raise VectorFileError(f"{path}: expected a C-ordered float32 matrix, got {dtype} "
                              f"{shape}{' (Fortran order)' if fortran else ''}")
    return VectorFile(str(p.resolve()), "npy", offset, int(shape[0]), int(shape[1]), metric)


def read_vector_file(path: str | os.PathLike[str]) -> VectorFile:
    """A faiss flat file or a ``.npy``, told apart by their first bytes."""
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"vector file not found: {path}")
    with open(p, "rb") as f:
        magic = f.read(6)
    if magic == b"\x93NUMPY":
        return read_npy(p)
    return read_faiss_flat(p)


class VectorReader:
    """Rows of a flat vector file read with ``pread`` into buffers this process owns.

    Reading instead of memory-mapping keeps the file's pages in the shared page cache, not in
    this process's resident set: a server's RSS stays at its buffers however much of a 64 GB
    file it has scanned, and the kernel keeps what fits of the file cached for every worker.
    """

    def __init__(self, vf: VectorFile) -> None:
        self.vf = vf
        self.rows, self.dim = vf.rows, vf.dim
        self._row_bytes = 4 * vf.dim
        self._fd = os.open(vf.path, os.O_RDONLY)

    def __len__(self) -> int:
        return self.rows

    def __del__(self) -> None:
        self.close()

    def close(self) -> None:
        fd = getattr(self, "_fd", None)
        if fd is not None:
            os.close(fd)
            self._fd = None

    def block(self, lo: int, hi: int, out: np.ndarray | None = None) -> np.ndarray:
        """Rows ``lo:hi`` (into ``out``'s first rows when given)."""
        hi = min(hi, self.rows)
        n = max(0, hi - lo)
        buf = out[:n] if out is not None else np.empty((n, self.dim), np.float32)
        view = memoryview(buf.reshape(-1).view(np.uint8))
        pos, want = self.vf.offset + lo * self._row_bytes, n * self._row_bytes
        done = 0
        while done < want:
            got = os.preadv(self._fd, [view[done:]], pos + done)
            if got <= 0:
                raise VectorFileError(f"{self.vf.path}: short read at row {lo + done // self._row_bytes}")
            done += got
        return buf

    def take(self, rows: np.ndarray) -> np.ndarray:
        """The given rows, in the given order (one read per row)."""
        out = np.empty((len(rows), self.dim), np.float32)
        for i, r in enumerate(rows.tolist()):
            self.block(r, r + 1, out[i : i + 1])
        return out
