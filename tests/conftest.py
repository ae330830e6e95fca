"""Shared fixtures. Real QA data for tests ships with the repository in tests/fixtures/qa (a small
subset of the benchmark files; the full ones in ../shared/data are for benchmarks)."""

from __future__ import annotations

from pathlib import Path

import pytest

QA_DATA = Path(__file__).resolve().parent / "fixtures" / "qa"


@pytest.fixture(scope="session")
def qa_data() -> Path:
    """The in-repo QA fixture directory: ``<dataset>.questions.jsonl``, ``<dataset>.corpus.jsonl``
    for hotpotqa, 2wikimultihopqa, musique and nq_open, and ``metric_reference.jsonl``."""
    return QA_DATA
