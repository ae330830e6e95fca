"""Checkpoints that resume exactly: trainable weights, optimizer, scheduler, RNG states,
the iteration reached and the controller state.

Layout: ``<out>/checkpoints/iter-000012/`` holds ``policy/`` (the adapter in peft's layout,
or the full model, plus the value head: what ``--adapter`` loads), ``trainable.pt`` (every
trainable tensor by name, for resuming), ``optimizer.pt``, ``scheduler.pt``, ``rng.pt`` and
``state.json``. Under FSDP the trainer gathers the trainable tensors and a name-keyed optimizer
state (torch's ``get_optimizer_state_dict``) first and passes them in; ``load`` puts either
kind back into either kind of module (``sharded``: through torch's ``set_*_state_dict``).
A checkpoint is written to a temporary folder and renamed into place, and
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
         state: dict[str, Any], keep: int, *, trainable: dict[str, torch.Tensor] | None = None,
         optimizer_state: dict[str, Any] | None = None, with_policy: bool = True) -> Path:
    """Write checkpoint ``iteration`` under ``root`` (= ``<out>/checkpoints``).
    ``trainable``/``optimizer_state``: gathered whole from a sharded module (else read from
    ``policy``/``optimizer``). ``scheduler``: None for a run without one. ``with_policy``:
    False leaves out the loadable ``policy/`` copy (resuming needs only ``trainable.pt``;
    under full fine-tuning that copy is the whole model again)."""
    root.mkdir(parents=True, exist_ok=True)
    final = root / f"iter-{iteration:06d}"
    tmp = root / f".tmp-iter-{iteration:06d}"
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir()
    if with_policy:
        save_policy(policy, tmp / "policy", trainable)
    if trainable is None:
        trainable = {n: p.detach().cpu().clone() for n, p in policy.named_parameters()
                     if p.requires_grad}
    torch.save(trainable, tmp / "trainable.pt")
    torch.save(optimizer.state_dict() if optimizer_state is None else optimizer_state,
               tmp / "optimizer.pt")
    if scheduler is not None:
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


def keep_best(out: Path, checkpoint: Path, iteration: int, score: float, key: str) -> bool:
    """Copy ``checkpoint``'s policy to ``<out>/best/policy`` when ``score`` beats the one
    recorded in ``<out>/best/best.json`` (kept across resumes); True when it did. Checkpoint
    selection on the evaluation split: older checkpoints are pruned, the best one stays."""
    best = out / "best"
    record = best / "best.json"
    if record.is_file() and json.loads(record.read_text())["score"] >= score:
        return False
    tmp = out / ".tmp-best"
    if tmp.exists():
        shutil.rmtree(tmp)
    shutil.copytree(checkpoint / "policy", tmp / "policy")
    (tmp / "best.json").write_text(json.dumps(
        {"iteration": iteration, "score": score, "metric": key,
         "checkpoint": checkpoint.name}, indent=1))
    if best.exists():
        shutil.rmtree(best)
    os.replace(tmp, best)
    return True


def latest(root: Path) -> Path | None:
    """The newest complete checkpoint under ``root``, or None."""
    marker = root / LATEST
    if not marker.is_file():
        return None
    path = root / marker.read_text().strip()
    return path if (path / "state.json").is_file() else None


def load(path: Path, policy: PolicyValue, optimizer: Any, scheduler: Any,
         sharded: bool = False) -> dict[str, Any]:
    """Restore a checkpoint in place; returns its ``state.json``. ``sharded``: ``policy`` is
    FSDP-sharded (every process loads the whole tensors and keeps its shard). ``scheduler``:
    None for a run without one."""
    trainable = torch.load(path / "trainable.pt", map_location="cpu")
    params = dict(policy.named_parameters())
    missing = [n for n in trainable if n not in params]
    if missing:
        raise ValueError(f"{path}: checkpoint has parameters this model lacks: {missing[:3]}")
    opt_state = torch.load(path / "optimizer.pt", map_location="cpu", weights_only=False)
    if sharded or _by_name(opt_state):
        from torch.distributed.checkpoint.state_dict import (
            StateDictOptions,
            set_model_state_dict,
            set_optimizer_state_dict,
        )

        whole = StateDictOptions(full_state_dict=True, strict=False)
        set_model_state_dict(policy, trainable, options=whole)
        if not _by_name(opt_state):
            opt_state = _names_for_indices(opt_state, policy, optimizer)
        set_optimizer_state_dict(policy, _inner(optimizer), opt_state, options=whole)
    else:
        with torch.no_grad():
            for name, value in trainable.items():
                params[name].copy_(value.to(params[name].device))
        optimizer.load_state_dict(opt_state)
    if scheduler is not None:
        scheduler.load_state_dict(torch.load(path / "scheduler.pt", weights_only=False))
    set_rng_state(torch.load(path / "rng.pt", weights_only=False))
    return json.loads((path / "state.json").read_text())


def optimizer_state_by_name(policy: PolicyValue, optimizer: Any) -> dict[str, Any]:
    """The optimizer state keyed by parameter name, whole on the main process: under FSDP
    every process must call this (it gathers the shards)."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_optimizer_state_dict

    return get_optimizer_state_dict(policy, _inner(optimizer), options=StateDictOptions(
        full_state_dict=True, cpu_offload=True))


def _inner(optimizer: Any) -> Any:
    """The torch optimizer under accelerate's wrapper."""
    return getattr(optimizer, "optimizer", optimizer)


def _by_name(opt_state: dict[str, Any]) -> bool:
    return any(isinstance(k, str) for k in opt_state.get("state", {})) or any(
        isinstance(p, str) for g in opt_state.get("param_groups", []) for p in g["params"])


def _names_for_indices(opt_state: dict[str, Any], policy: PolicyValue, optimizer: Any
                       ) -> dict[str, Any]:
    """An index-keyed ``optimizer.state_dict()`` (DDP, one process) keyed by parameter name,
    the form torch's ``set_optimizer_state_dict`` takes."""
    name_of = {id(p): n for n, p in policy.named_parameters()}
    names = [name_of[id(p)] for g in _inner(optimizer).param_groups for p in g["params"]]
    state = {names[i]: v for i, v in opt_state["state"].items()}
    groups = [{**g, "params": [names[i] for i in g["params"]]} for g in opt_state["param_groups"]]
    return {"state": state, "param_groups": groups}


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)
