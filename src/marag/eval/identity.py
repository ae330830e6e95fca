"""What a run directory records about how it was made, and what makes two runs the same."""

from __future__ import annotations

import platform
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

from marag.config import Config

# Settings that say where or how fast to run, not what to compute: changing them between a
# crash and its resume (a server moved port, more workers) must not invalidate the run.
OPERATIONAL_LLM_KEYS = ("base_url", "api_key_env", "max_concurrency", "timeout", "retries",
                        "max_batch_size", "batch_wait_ms", "device", "cache_dir", "n_threads",
                        "prefix_entries", "prefix_tokens")
OPERATIONAL_RETRIEVAL_KEYS = ("url", "timeout")
# Sections no evaluation reads: a run evaluated with a training config resumes after its
# train/sft settings change (the eval section has its own identity fields: limit, seed).
NOT_EVAL_SECTIONS = ("eval", "train", "sft")


def config_identity(config: Config) -> dict[str, Any]:
    """The result-affecting part of a config (limit/seed live in the identity separately)."""
    data = config.model_dump(mode="json")
    for section in NOT_EVAL_SECTIONS:
        data.pop(section, None)
    for llm in data.get("llms", {}).values():
        for key in OPERATIONAL_LLM_KEYS:
            llm.pop(key, None)
    for key in OPERATIONAL_RETRIEVAL_KEYS:
        data.get("retrieval", {}).pop(key, None)
    return data


def adapter_digest(folder: str | Path) -> str:
    """SHA-256 (first 16 hex digits) of what a LoRA folder computes: its ``adapter_config.json``
    and its weights, each floating tensor rounded to bfloat16 first, so that the copy
    ``benchmarks/stash_runs.py`` keeps (rounded to bfloat16 to halve its bytes, the copy
    marag's long runs resume from on another machine) is the same adapter."""
    import hashlib

    import torch

    folder = Path(folder)
    h = hashlib.sha256()
    config = folder / "adapter_config.json"
    if config.is_file():
        h.update(b"adapter_config.json\0" + config.read_bytes())
    if (folder / "adapter_model.safetensors").is_file():
        from safetensors.torch import load_file

        weights = load_file(str(folder / "adapter_model.safetensors"))
    elif (folder / "adapter_model.bin").is_file():
        weights = torch.load(folder / "adapter_model.bin", map_location="cpu", weights_only=True)
    else:
        weights = {}
    for name in sorted(weights):
        t = weights[name]
        if t.is_floating_point():
            t = t.to(torch.bfloat16).view(torch.int16)
        t = t.contiguous()
        h.update(f"\0{name}\0{t.dtype}\0{tuple(t.shape)}\0".encode())
        h.update(t.numpy().tobytes())
    return h.hexdigest()[:16]


def adapter_identity(config: Config) -> dict[str, Any]:
    """``{"adapters": {llm: [digest, ...]}}`` for the hf LLMs that load adapters, else ``{}``;
    also ``{"adapter_names": {llm: ["name@date", ...]}}`` for the short names that came to
    stand for other folders on that date (``TrainedAdapter.since``).

    The config names an adapter by folder or by a short name (``qwen-jade``), and neither says
    what is in it: a run resumed after its adapter was retrained into the same folder, or after
    a short name came to stand for other folders, would mix two models' answers. Each folder's
    :func:`adapter_digest` makes that a different run. A run directory made before marag
    recorded digests resumes without them (``rundir.IDENTITY_FIELDS_SINCE``), so a name
    re-pointed since also records ``adapter_names``, a field such a directory lacks and is
    refused for. A name or folder that does not resolve is left to the backend's own error (the
    commands check adapters before this)."""
    from marag.llm.base import LLMError
    from marag.llm.trained import registered, resolve_adapters

    out: dict[str, list[str]] = {}
    names: dict[str, list[str]] = {}
    digests: dict[str, str] = {}  # one hashing per folder (a row's LLMs may share one)
    for name, llm in config.llms.items():
        if llm.backend != "hf" or not llm.adapter:
            continue
        specs = [(e, registered(e)) for e in llm.adapter]
        repointed = [f"{e}@{a.since}" for e, a in specs if a is not None and a.since]
        if repointed:
            names[name] = repointed
        try:
            folders = resolve_adapters(llm.adapter, llm.model)
        except LLMError:
            continue
        for f in folders:
            if f not in digests:
                digests[f] = adapter_digest(f)
        out[name] = [digests[f] for f in folders]
    return {**({"adapters": out} if out else {}),
            **({"adapter_names": names} if names else {})}


def comparable_identity(identity: dict[str, Any]) -> dict[str, Any]:
    """An identity as today's ``config_identity`` would write it, so older run directories
    still resume: the train/sft sections they recorded are left out, and a setting added to
    marag since then takes its default (what the run computed before the setting existed).
    A recorded config today's schema refuses (a setting since removed) is compared as it is."""
    config = identity.get("config")
    if not isinstance(config, dict):
        return identity
    config = {k: v for k, v in config.items() if k not in NOT_EVAL_SECTIONS}
    if "adapter_names" not in identity:  # made before a short name it used was re-pointed
        config = _earlier_names(config)
    try:
        config = config_identity(Config.model_validate(config))
    except ValueError:
        pass
    return {**identity, "config": config}


def _earlier_names(config: dict[str, Any]) -> dict[str, Any]:
    """A recorded config with each re-pointed short name (``TrainedAdapter.since``) spelled as
    what its earlier meaning is registered as now (``qwen-jade`` -> ``qwen-jade-2c``), so that
    a run folder made under the old meaning resumes under the new name and is refused under
    the old one. Adapter folders are left as they are."""
    from marag.llm.trained import registered

    def spelled(entry: Any) -> Any:
        spec = registered(entry) if isinstance(entry, str) else None
        return spec.before if spec is not None and spec.before else entry

    llms = config.get("llms")
    if not isinstance(llms, dict):
        return config
    out = {}
    for name, llm in llms.items():
        adapters = llm.get("adapter") if isinstance(llm, dict) else None
        if isinstance(adapters, list):
            llm = {**llm, "adapter": [spelled(e) for e in adapters]}
        out[name] = llm
    return {**config, "llms": out}


def versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for dist in ("marag", "torch", "transformers", "sentence-transformers", "bm25s"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    return out


def run_info(argv: list[str] | None = None, **extra: Any) -> dict[str, Any]:
    """Recorded, not compared: versions, command line, host facts."""
    return {
        "versions": versions(),
        "command": list(sys.argv if argv is None else argv),
        "platform": platform.platform(),
        **extra,
    }
