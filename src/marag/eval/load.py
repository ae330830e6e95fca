"""Read a run directory back (for reports): manifest, traces, and a fresh summary."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from marag.eval.rundir import MANIFEST, TRACES, RunDirError, recover_traces
from marag.eval.summary import summarize
from marag.metrics import Scorer
from marag.types import Trace


@dataclass
class RunData:
    path: Path
    manifest: dict[str, Any]
    traces: list[Trace]
    summary: dict[str, Any]

    @property
    def method(self) -> str:
        ident = self.manifest.get("identity", {})
        return str(ident.get("method") or (self.traces[0].method if self.traces else self.path.name))

    @property
    def datasets(self) -> list[str]:
        return list(self.summary["datasets"])


def load_run(path: str | Path, scorer: Scorer | None = None) -> RunData:
    """Load ``run.json`` and ``traces.jsonl`` and recompute the summary from the traces.

    Read-only: a torn last line (a run still writing, or killed) is skipped, not repaired.
    """
    root = Path(path)
    traces_path = root / TRACES
    if not traces_path.is_file():
        raise RunDirError(f"{root}: no {TRACES}; not a run directory")
    manifest: dict[str, Any] = {}
    if (root / MANIFEST).is_file():
        try:
            manifest = json.loads((root / MANIFEST).read_text(encoding="utf-8"))
        except ValueError as e:
            raise RunDirError(f"{root / MANIFEST}: unreadable ({e})") from None
    seen: dict[str, Trace] = {}
    for t in recover_traces(traces_path, repair=False):
        seen.setdefault(t.id, t)
    traces = list(seen.values())
    return RunData(root, manifest, traces, summarize(traces, scorer))
