"""The run directory: ``traces.jsonl`` (append-only, crash-safe), ``run.json`` and friends.

A run is resumable because every finished trace is appended and fsync'd as it completes.
A crash can only leave the line being written unfinished; ``recover_traces`` cuts that torn
tail off so the question is run again, and refuses any damage elsewhere in the file (that is
not something a crash of ours produces, so it is reported with its line number).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from marag.eval.identity import comparable_identity
from marag.types import Trace, append_jsonl

log = logging.getLogger(__name__)

TRACES = "traces.jsonl"
MANIFEST = "run.json"
METRICS = "metrics.json"
REPORT = "report.md"
CONFIG = "config.yaml"
# identity fields added after run directories existed (``marag.eval.identity``): adapter
# digests since 2026-11-30
IDENTITY_FIELDS_SINCE = ("adapters",)


class RunDirError(RuntimeError):
    """A run directory that cannot be resumed as asked (different run, damaged traces)."""


def ids_digest(ids: list[str]) -> str:
    """A short fingerprint of the question set (order-sensitive) for the resume check."""
    h = hashlib.sha256("\n".join(ids).encode("utf-8"))
    return h.hexdigest()[:16]


def recover_traces(path: Path, *, repair: bool = True) -> list[Trace]:
    """Read every complete trace; truncate a torn last line left by a crash.

    The last line counts as torn when it lacks its newline or does not parse. Damage on any
    earlier line raises ``RunDirError`` naming the file and line. With ``repair=False`` the
    torn line is skipped but the file is left alone (a reader beside a live run).
    """
    if not path.exists():
        return []
    data = path.read_bytes()
    lines = data.split(b"\n")
    # After split, a file ending in "\n" has an empty last element; anything else is torn.
    tail = lines.pop()
    keep = len(data) - len(tail)
    traces: list[Trace] = []
    for lineno, raw in enumerate(lines, 1):
        if not raw.strip():
            continue
        try:
            traces.append(Trace.from_dict(json.loads(raw)))
        except (ValueError, TypeError, KeyError) as e:
            if lineno == len(lines) and not tail:
                log.warning("%s:%d: last line is damaged (%s); dropping it, its question reruns",
                            path, lineno, e)
                keep -= len(raw) + 1
                break
            raise RunDirError(f"{path}:{lineno}: not a valid trace ({e}); the file is damaged "
                              "before its last line, so it was not written by an interrupted run"
                              ) from None
    if keep != len(data) and repair:
        log.warning("%s: cutting %d bytes of an unfinished trace left by an interrupted run",
                    path, len(data) - keep)
        with open(path, "r+b") as f:
            f.truncate(keep)
            f.flush()
            os.fsync(f.fileno())
    return traces


def rewrite_traces(path: Path, traces: list[Trace]) -> None:
    """Atomically replace the traces file (used to drop failed items before retrying them)."""
    tmp = path.with_suffix(".jsonl.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        f.writelines(json.dumps(t.to_dict(), ensure_ascii=False) + "\n" for t in traces)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


@dataclass
class RunDir:
    """An opened run directory. ``done`` maps question id to its recorded trace."""

    path: Path
    manifest: dict[str, Any]
    done: dict[str, Trace] = field(default_factory=dict)

    @property
    def traces_path(self) -> Path:
        return self.path / TRACES

    def append(self, trace: Trace) -> None:
        append_jsonl(self.traces_path, trace)
        self.done[trace.id] = trace

    def append_many(self, traces: list[Trace]) -> None:
        """Append several traces with one write and one fsync (group commit)."""
        text = "".join(json.dumps(t.to_dict(), ensure_ascii=False) + "\n" for t in traces)
        with open(self.traces_path, "a", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        for t in traces:
            self.done[t.id] = t

    def write_json(self, name: str, obj: Any) -> None:
        tmp = self.path / f".{name}.tmp"
        tmp.write_text(json.dumps(obj, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        os.replace(tmp, self.path / name)

    def write_text(self, name: str, text: str) -> None:
        tmp = self.path / f".{name}.tmp"
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, self.path / name)


def describe_change(old: dict[str, Any], new: dict[str, Any], prefix: str = "") -> list[str]:
    """``key: old -> new`` for every dotted key whose value differs (nested dicts walked)."""
    changes = []
    for key in sorted(set(old) | set(new)):
        a, b = old.get(key), new.get(key)
        if isinstance(a, dict) and isinstance(b, dict):
            changes += describe_change(a, b, f"{prefix}{key}.")
        elif a != b:
            changes.append(f"{prefix}{key}: {a!r} -> {b!r}")
    return changes


def open_run_dir(path: str | os.PathLike[str], identity: dict[str, Any],
                 info: dict[str, Any] | None = None, *, force: bool = False,
                 retry_failed: bool = False) -> RunDir:
    """Create or resume a run directory.

    ``identity`` is what makes two runs the same run (method, dataset, question set, the
    result-affecting config); resuming with a different identity is a ``RunDirError`` unless
    ``force``, which moves the old traces aside and starts over. ``info`` is recorded but not
    compared (versions, command line). ``retry_failed`` drops failed traces so they rerun.
    """
    root = Path(path)
    root.mkdir(parents=True, exist_ok=True)
    manifest_path = root / MANIFEST
    now = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    traces_path = root / TRACES
    old: dict[str, Any] | None = None
    if manifest_path.exists():
        try:
            old = json.loads(manifest_path.read_text(encoding="utf-8"))
        except ValueError as e:
            raise RunDirError(f"{manifest_path}: unreadable ({e})") from None
    elif traces_path.exists() and traces_path.stat().st_size and not force:
        raise RunDirError(f"{root} holds traces but no {MANIFEST}; use --force or a new directory")

    old_identity = comparable_identity(old.get("identity") or {}) if old is not None else None
    compared = identity
    if old_identity is not None:
        # identity fields marag records since a later version: a run directory made before
        # lacks them and resumes on the rest (the manifest records them from now on)
        compared = {k: v for k, v in identity.items()
                    if k not in IDENTITY_FIELDS_SINCE or k in old_identity}
    if old is not None and old_identity != compared:
        changes = describe_change(old_identity or {}, compared)
        if not force:
            hint = ""
            if any(c.startswith("adapter_names") for c in changes):
                from marag.llm.trained import repointed_names

                hint = f" ({repointed_names()})"
            raise RunDirError(
                f"{root} holds a different run ({'; '.join(changes[:6])}){hint}; "
                "pass --force to discard it or choose a new --out directory")
        old = None
    if old is None and traces_path.exists() and traces_path.stat().st_size:
        aside = root / f"traces.replaced-{time.strftime('%Y%m%d-%H%M%S')}.jsonl"
        os.replace(traces_path, aside)
        log.warning("moved the previous run's traces to %s", aside)

    manifest = dict(old) if old else {"identity": identity, "created": now, "resumes": []}
    manifest.update(info or {})
    manifest["identity"] = identity
    if old:
        manifest["resumes"] = list(old.get("resumes", [])) + [
            {"at": now, "command": (info or {}).get("command")}]
    run = RunDir(root, manifest)
    run.write_json(MANIFEST, manifest)

    traces = recover_traces(traces_path)
    kept = [t for t in traces if not (retry_failed and t.status == "failed")]
    if len(kept) != len(traces):
        rewrite_traces(traces_path, kept)
        log.info("dropped %d failed traces to retry them", len(traces) - len(kept))
    for t in kept:
        if t.id in run.done:
            log.warning("%s: question %s recorded twice; keeping the first", traces_path, t.id)
            continue
        run.done[t.id] = t
    return run
