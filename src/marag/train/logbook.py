"""Per-iteration training metrics: ``metrics.jsonl`` (the record), ``metrics.csv`` (the same
rows for spreadsheets, rewritten with the union of columns) and TensorBoard event files when
the ``tensorboard`` package is installed."""

from __future__ import annotations

import csv
import json
import logging
import os
from pathlib import Path
from typing import Any

from marag.jax_tf import tensorboard_without_tensorflow

log = logging.getLogger(__name__)


class Logbook:
    def __init__(self, out: Path, tensorboard: bool = True) -> None:
        self.out = out
        self.jsonl = out / "metrics.jsonl"
        self.csv = out / "metrics.csv"
        self._tb: Any = None
        if tensorboard:
            tensorboard_without_tensorflow()  # before torch.utils.tensorboard reads it
            try:
                from torch.utils.tensorboard import SummaryWriter

                self._tb = SummaryWriter(str(out / "tensorboard"))
            except ImportError:
                log.info("tensorboard is not installed; metrics go to metrics.jsonl/.csv only")

    def rows(self) -> list[dict[str, Any]]:
        from marag.report.training import metrics_rows

        return metrics_rows(self.jsonl) if self.jsonl.is_file() else []

    def truncate(self, last_iteration: int) -> None:
        """Keep the rows up to ``last_iteration`` (resuming from that checkpoint)."""
        rows = [r for r in self.rows() if r["iteration"] <= last_iteration]
        self._rewrite(rows)

    def write(self, row: dict[str, Any]) -> None:
        with open(self.jsonl, "a", encoding="utf-8") as f:
            f.write(json.dumps(row) + "\n")
            f.flush()
            os.fsync(f.fileno())
        self._write_csv(self.rows())
        if self._tb is not None:
            for k, v in row.items():
                if isinstance(v, (int, float)) and k != "iteration":
                    self._tb.add_scalar(k.replace(".", "/"), v, row["iteration"])
            self._tb.flush()

    def close(self) -> None:
        if self._tb is not None:
            self._tb.close()

    def _rewrite(self, rows: list[dict[str, Any]]) -> None:
        tmp = self.jsonl.with_suffix(".tmp")
        tmp.write_text("".join(json.dumps(r) + "\n" for r in rows))
        os.replace(tmp, self.jsonl)
        self._write_csv(rows)

    def _write_csv(self, rows: list[dict[str, Any]]) -> None:
        cols: list[str] = []
        for r in rows:
            cols += [k for k in r if k not in cols]
        tmp = self.csv.with_suffix(".tmp")
        with open(tmp, "w", newline="", encoding="utf-8") as f:
            w = csv.DictWriter(f, fieldnames=cols)
            w.writeheader()
            w.writerows(rows)
        os.replace(tmp, self.csv)
