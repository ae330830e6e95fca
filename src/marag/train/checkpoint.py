"""Checkpoints that resume exactly: trainable weights, optimizer, scheduler, RNG states,
the iteration reached and the controller state.

Layout: ``<out>/checkpoints/iter-000012/`` holds ``policy/`` (the adapter in peft's layout,
or the full model, plus the value head: what ``--adapter`` loads), ``trainable.pt`` (every
trainable tensor by name, for resuming), ``optimizer.pt``, ``scheduler.pt``, ``rng.pt`` and
``state.json``. A checkpoint is written to a temporary folder and renamed into place, and
``checkpoints/latest`` names the newest complete one, so a kill mid-save loses nothing.
"""

from __future__ import annotations

import json
import os
import random
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import torch

from marag.train.policy import PolicyValue, save_policy

LATEST = "latest"


def rng_state() -> dict[str, Any]:
    state = {"python": random.getstate(), "numpy": np.random.get_state(),
             "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def save(root: Path, iteration: int, policy: PolicyValue, optimizer: Any, scheduler: Any,
         state: dict[str, Any], keep: int) -> Path:
    """Write checkpoint ``iteration`` under ``root`` (= ``<out>/checkpoints``)."""
    root.mkdir(parents=True, exist_ok=True)
    final = root / f"iter-{iteration:06d}"
    tmp = root / f".tmp-iter-{iteration:06d}"
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir()
    save_policy(policy, tmp / "policy")
    trainable = {n: p.detach().cpu().clone() for n, p in policy.named_parameters()
                 if p.requires_grad}
    torch.save(trainable, tmp / "trainable.pt")
    torch.save(optimizer.state_dict(), tmp / "optimizer.pt")
    torch.save(scheduler.state_dict(), tmp / "scheduler.pt")
    torch.save(rng_state(), tmp / "rng.pt")
    (tmp / "state.json").write_text(json.dumps({"iteration": iteration, **state}, indent=1))
    if final.exists():
        shutil.rmtree(final)
    os.replace(tmp, final)
    _write_atomic(root / LATEST, final.name)
    for old in sorted(p for p in root.glob("iter-*") if p.is_dir())[:-keep]:
        shutil.rmtree(old, ignore_errors=True)
    return final


def latest(root: Path) -> Path | None:
    """The newest complete checkpoint under ``root``, or None."""
    marker = root / LATEST
    if not marker.is_file():
        return None
    path = root / marker.read_text().strip()
    return path if (path / "state.json").is_file() else None


def load(path: Path, policy: PolicyValue, optimizer: Any, scheduler: Any) -> dict[str, Any]:
    """Restore a checkpoint in place; returns its ``state.json``."""
    trainable = torch.load(path / "trainable.pt", map_location="cpu")
    params = dict(policy.named_parameters())
    missing = [n for n in trainable if n not in params]
    if missing:
        raise ValueError(f"{path}: checkpoint has parameters this model lacks: {missing[:3]}")
    with torch.no_grad():
        for name, value in trainable.items():
            params[name].copy_(value.to(params[name].device))
    optimizer.load_state_dict(torch.load(path / "optimizer.pt", map_location="cpu",
                                         weights_only=False))
    scheduler.load_state_dict(torch.load(path / "scheduler.pt", weights_only=False))
    set_rng_state(torch.load(path / "rng.pt", weights_only=False))
    return json.loads((path / "state.json").read_text())


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)
