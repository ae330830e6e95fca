"""Per row of a `marag table` out folder: questions, wall seconds, and wall seconds per
question, from each cell's run.json `created` to its traces.jsonl's last write (the row's
model load excluded). The table's own "s/q" is a question's mean latency with many in flight.

    python benchmarks/table_cell_walls.py runs/tables-confirm
"""

from __future__ import annotations

import datetime as dt
import json
import os
import sys
from pathlib import Path


def walls(out: Path) -> list[tuple[str, int, float]]:
    """(row, questions answered, wall seconds) for every row folder under ``out/runs``."""
    rows = []
    for row in sorted(p for p in (out / "runs").iterdir() if p.is_dir()):
        n, secs = 0, 0.0
        for cell in sorted(p for p in row.iterdir() if p.is_dir()):
            traces = cell / "traces.jsonl"
            if not traces.exists():
                continue
            created = dt.datetime.fromisoformat(json.loads((cell / "run.json").read_text())
                                                ["created"])
            secs += os.path.getmtime(traces) - created.timestamp()
            n += sum(1 for line in traces.open() if line.strip())
        rows.append((row.name, n, secs))
    return rows


def main(argv: list[str]) -> int:
    print("row\tquestions\twall s\twall s/q")
    for name, n, secs in walls(Path(argv[0])):
        print(f"{name}\t{n}\t{secs:.0f}\t{secs / max(n, 1):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
