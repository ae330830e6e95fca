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


def _value_pattern(prop: dict[str, object]) -> str | None:
    """A regex for the override values (YAML scalars) a config field takes; None: none can be
    written on one line that the schema documents (maps, lists)."""
    if "enum" in prop:
        return "(" + "|".join(str(v) for v in prop["enum"]) + ")"  # type: ignore[attr-defined]
    kinds = [prop] + list(prop.get("anyOf", []))  # type: ignore[call-overload]
    types = {k.get("type") for k in kinds if isinstance(k, dict)}
    if "boolean" in types:
        return "(true|false)" + ("|null" if "null" in types else "")
    if "integer" in types:
        least = prop.get("minimum", None)
        return "[1-9][0-9]{0,5}" if least == 1 else "(0|[1-9][0-9]{0,5})"
    if "number" in types:
        if prop.get("maximum") == 1:  # top_p: (0, 1]
            return r"(0\.[0-9]{0,2}[1-9]|1(\.0{1,3})?)"
        return r"(0|[1-9][0-9]?)(\.[0-9]{1,3})?"
    return None


def override_pattern() -> str:
    """The ``overrides`` a request may carry, as one regex: ``key=value`` for the fields under
    OVERRIDABLE whose values fit on one line (the OpenAPI of ``POST /api/ask`` shows it)."""
    from marag.config import Config

    alternatives = []
    for prefix in OVERRIDABLE:
        section = Config.model_fields[prefix.rstrip(".")].annotation
        props = section.model_json_schema()["properties"]  # type: ignore[union-attr]
        for name, prop in props.items():
            value = _value_pattern(prop)
            if value is not None and f"{prefix}{name}" != "method.name":
                alternatives.append(f"{prefix}{name}=({value})".replace(".", r"\.", 1))
    return "^(" + "|".join(alternatives) + ")$"
