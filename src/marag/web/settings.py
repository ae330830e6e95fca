"""``marag serve`` limits and access settings (strict: an unknown key is an error)."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

TOKEN_ENV = "MARAG_TOKEN"
# Per-request config overrides may change how a method runs, never what the server loaded
# (backends and the index are built once at start and shared by every request).
OVERRIDABLE = ("method.", "sampling.")


class ServeSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    runs: Path | None = None
    token: str | None = Field(None, min_length=8)
    max_body_bytes: int = Field(64 * 1024, ge=1024)
    max_question_chars: int = Field(2000, ge=1)
    max_concurrent_asks: int = Field(16, ge=1)
    ask_timeout: float | None = Field(600.0, gt=0)
    max_page: int = Field(500, ge=1)
