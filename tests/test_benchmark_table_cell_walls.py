import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

from table_cell_walls import walls


def test_a_row_sums_its_cells_from_creation_to_the_last_trace(tmp_path):
    for cell, n, took in (("nq", 3, 30.0), ("hotpotqa", 2, 50.0)):
        d = tmp_path / "runs" / "vanilla" / cell
        d.mkdir(parents=True)
        (d / "run.json").write_text(json.dumps({"created": "2026-11-27T04:00:00+0000"}))
        (d / "traces.jsonl").write_text("{}\n" * n)
        start = 1795752000.0  # 2026-11-27T04:00:00Z
        os.utime(d / "traces.jsonl", (start + took, start + took))
    (tmp_path / "runs" / "jade" / "nq").mkdir(parents=True)  # a cell not started: no traces
    assert walls(tmp_path) == [("jade", 0, 0.0), ("vanilla", 5, 80.0)]
