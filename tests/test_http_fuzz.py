"""Schemathesis (every check, fixed seed, few examples per route) against the three servers on
loopback ports: serve-llm on the tiny model, serve-retriever and serve on a BM25 index of the
NQ-open fixture corpus. Nothing may be found: no 5xx, no status or body the OpenAPI does not
document, no valid request refused, no invalid one accepted. The deeper run is
benchmarks/fuzz_servers.py (BENCHMARKS.md)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"
pytest.importorskip("schemathesis")
sys.path.insert(0, str(BENCH))
import fuzz_servers  # noqa: E402

# examples per route: the coverage phase adds its boundary cases on top of these
EXAMPLES = {"llm": 3, "retriever": 10, "web": 10}


@pytest.mark.parametrize("name", fuzz_servers.SERVERS)
def test_schemathesis_finds_nothing(name, tmp_path):
    with fuzz_servers.serve(fuzz_servers.APPS[name](tmp_path)) as url:
        done = fuzz_servers.schemathesis(
            url, examples=EXAMPLES[name], seed=fuzz_servers.SEED,
            phases="examples,coverage,fuzzing,stateful",
            exclude=fuzz_servers.EXCLUDE.get(name, ""), timeout=300)
    assert done.returncode == 0, done.stdout[-8000:] + done.stderr[-2000:]
    assert " passed" in done.stdout and "failed" not in done.stdout.split("SUMMARY")[-1]
