"""How an index's vectors were made, recorded so queries are encoded the same way.

An imported index was encoded by someone else (Search-R1 and FlashRAG ship E5-base-v2 vectors
of wiki-18: ``passage: `` prefix for passages, ``query: `` for queries, mean pooling over the
tokens, L2-normalised, searched by inner product). The manifest's ``query_encoder`` records
those settings; opening the index loads the encoder and checks that it pools and measures the
way the record says and has the vectors' dimension, and refuses it otherwise, because a query
encoded differently from the passages still returns results, just wrong ones.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from marag.retrieval.dense import canonical_encoder, default_prefixes

POOLINGS = ("mean", "cls", "max", "lasttoken", "weightedmean")
METRICS = ("inner_product", "l2")


class EncoderMismatch(ValueError):
    """The encoder at hand does not encode queries the way the index's vectors were made."""


@dataclass(frozen=True, slots=True)
class EncoderSettings:
    name: str
    query_prefix: str
    passage_prefix: str
    pooling: str
    normalize: bool
    metric: str
    dim: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> EncoderSettings:
        return cls(d["name"], d.get("query_prefix", ""), d.get("passage_prefix", ""),
                   d.get("pooling", "mean"), bool(d.get("normalize", True)),
                   d.get("metric", "inner_product"), int(d["dim"]))


def model_pooling(model: Any) -> str | None:
    """The pooling a sentence-transformers model applies (None when it has no Pooling module)."""
    for module in model:
        mode = getattr(module, "pooling_mode", None)
        if isinstance(mode, str):
            return mode
        get = getattr(module, "get_pooling_mode_str", None)
        if callable(get):
            return str(get())
    return None


def model_dim(model: Any) -> int:
    get = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
    return int(get())


def settings_for(
    model: Any,
    name: str | None,
    dim: int,
    metric: str,
    query_prefix: str | None = None,
    passage_prefix: str | None = None,
    pooling: str | None = None,
    normalize: bool = True,
) -> EncoderSettings:
    """Settings for vectors of ``dim`` made by ``model``; every stated one is checked."""
    name = canonical_encoder(name)
    q_default, p_default = default_prefixes(name)
    have = model_pooling(model)
    if pooling is not None and pooling not in POOLINGS:
        raise EncoderMismatch(f"unknown pooling {pooling!r} (choose from {', '.join(POOLINGS)})")
    if metric not in METRICS:
        raise EncoderMismatch(f"unknown metric {metric!r}")
    settings = EncoderSettings(
        name=name,
        query_prefix=q_default if query_prefix is None else query_prefix,
        passage_prefix=p_default if passage_prefix is None else passage_prefix,
        pooling=pooling or have or "mean",
        normalize=normalize,
        metric=metric,
        dim=dim,
    )
    check_model(model, settings)
    return settings


def stated_settings(name: str | None, dim: int, metric: str, query_prefix: str | None = None,
                    passage_prefix: str | None = None, pooling: str | None = None,
                    normalize: bool = True) -> EncoderSettings:
    """Settings as stated, without the encoder at hand (checked when the index is opened)."""
    name = canonical_encoder(name)
    q_default, p_default = default_prefixes(name)
    if pooling is not None and pooling not in POOLINGS:
        raise EncoderMismatch(f"unknown pooling {pooling!r} (choose from {', '.join(POOLINGS)})")
    return EncoderSettings(name, q_default if query_prefix is None else query_prefix,
                           p_default if passage_prefix is None else passage_prefix,
                           pooling or "mean", normalize, metric, dim)


def check_model(model: Any, settings: EncoderSettings) -> None:
    """Raise EncoderMismatch unless ``model`` makes vectors the way ``settings`` says."""
    dim = model_dim(model)
    if dim != settings.dim:
        raise EncoderMismatch(
            f"encoder {settings.name} makes {dim}-dim vectors but the index holds "
            f"{settings.dim}-dim ones: it was encoded with another model"
        )
    have = model_pooling(model)
    if have is not None and have != settings.pooling:
        raise EncoderMismatch(
            f"the index was encoded with {settings.pooling} pooling but encoder "
            f"{settings.name} pools by {have}: queries would not match the passages"
        )
