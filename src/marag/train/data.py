"""Training and held-out questions from ``train.datasets`` (pure functions of the config)."""

from __future__ import annotations

from pathlib import Path

from marag.config import TrainConfig
from marag.types import Question


def split_questions(cfg: TrainConfig) -> tuple[list[Question], list[Question]]:
    """``(train, held_out)``. Each dataset gives ``holdout_per_dataset`` questions (a sample
    seeded by ``holdout_seed``) to the held-out split; ``exclude_ids`` and the held-out ids never reach training.
    With ``eval_dataset`` set, the held-out split is that file instead (still excluded)."""
    from marag.datasets import load_questions, sample

    if not cfg.datasets:
        raise ValueError("train.datasets is empty: name at least one question file")
    train: list[Question] = []
    held: list[Question] = []
    seen: set[str] = set()
    for name in cfg.datasets:
        qs = load_questions(name)
        dup = [q.id for q in qs if q.id in seen]
        if dup:
            raise ValueError(f"{name}: question ids also in an earlier dataset: {dup[:3]}")
        seen.update(q.id for q in qs)
        out = (sample(qs, cfg.holdout_per_dataset, seed=cfg.holdout_seed)
               if cfg.holdout_per_dataset else [])
        out_ids = {q.id for q in out}
        held += out
        train += [q for q in qs if q.id not in out_ids]
    if cfg.eval_dataset:
        held = load_questions(cfg.eval_dataset, limit=cfg.eval_limit, seed=cfg.holdout_seed)
    elif cfg.eval_limit is not None:
        held = held[:cfg.eval_limit]
    excluded = {q.id for q in held}
    if cfg.exclude_ids:
        excluded |= {line.strip() for line in Path(cfg.exclude_ids).read_text().splitlines()
                     if line.strip()}
    train = [q for q in train if q.id not in excluded]
    if not train:
        raise ValueError("no training questions left after holding out and excluding ids")
    return train, held
