"""Shared fixtures. Real QA data lives beside the checkout in ../shared/data (never copied)."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"


@pytest.fixture(scope="session")
def shared_data() -> Path:
    if not (SHARED_DATA / "hotpotqa.questions.jsonl").is_file():
        pytest.skip(f"shared QA data not found at {SHARED_DATA}")
    return SHARED_DATA
