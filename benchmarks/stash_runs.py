"""Carry long runs' progress across CPU sessions on machines that do not keep ``runs/``.

A run of several CPU hours spans sessions, and a session may start on a fresh machine: what
``runs/`` held is gone, and only commits survive. ``save`` copies what a resumed run needs
into a folder that can be committed, small: each evaluation run's records with its traces
gzipped (``marag eval`` appends a trace per finished question, so a partial run resumes from
them), and each adapter folder's LoRA weights rounded to bfloat16 (half the bytes; marag
merges them as float32). ``restore`` puts them back where the run reads them, so the same
command resumes. Training state mid-run (optimizer moments, a half-finished SFT) is not
carried: stash a training stage once it has finished. The bytes written depend only on the
content (gzip without a time stamp), so saving an unchanged run changes nothing in git. A
restored run resumes only in a checkout at the same path: ``marag eval`` names its dataset
by absolute path in the run's identity.

    python benchmarks/stash_runs.py save runs/crossfit docs/results/qwen-runs/crossfit/full
    python benchmarks/stash_runs.py restore docs/results/qwen-runs/crossfit/full runs/crossfit
"""

from __future__ import annotations

import argparse
import fnmatch
import gzip
import shutil
import sys
import time
from pathlib import Path

RECORDS = ("run.json", "config.yaml", "metrics.json")  # an evaluation run's small records
ADAPTER_FILES = ("adapter_config.json", "value_head.pt")  # copied as they are


def count_lines(path: Path) -> int:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        return sum(1 for line in f if line.strip())


def kept(root: Path, folders: set[Path], include: list[str] | None) -> list[Path]:
    """``folders`` whose path relative to ``root`` matches a pattern of ``include`` (all of
    them when it is None)."""
    return sorted(f for f in folders if include is None
                  or any(fnmatch.fnmatch(str(f.relative_to(root)), i) for i in include))


def eval_runs(root: Path, include: list[str] | None = None) -> list[Path]:
    """Folders under ``root`` that hold an evaluation run's traces."""
    return kept(root, {p.parent for p in root.rglob("traces.jsonl*")
                       if p.name in ("traces.jsonl", "traces.jsonl.gz")}, include)


def adapters(root: Path, include: list[str] | None = None) -> list[Path]:
    return kept(root, {p.parent for p in root.rglob("adapter_config.json")
                       if (p.parent / "adapter_model.safetensors").is_file()}, include)


def gzip_to(src: Path, dst: Path) -> None:
    """``src`` gzipped into ``dst``, the same bytes for the same content (no time stamp)."""
    with open(src, "rb") as f, open(dst, "wb") as raw, \
            gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as g:
        shutil.copyfileobj(f, g)


def save_adapter(src: Path, dst: Path) -> None:
    import torch
    from safetensors.torch import load_file, save_file

    dst.mkdir(parents=True, exist_ok=True)
    weights = load_file(str(src / "adapter_model.safetensors"))
    save_file({k: v.to(torch.bfloat16) if v.is_floating_point() else v
               for k, v in weights.items()}, str(dst / "adapter_model.safetensors"))
    for name in ADAPTER_FILES:
        if (src / name).is_file():
            shutil.copy2(src / name, dst / name)


def save(src: Path, dst: Path, include: list[str] | None = None) -> list[str]:
    done = []
    for run in eval_runs(src, include):
        rel = run.relative_to(src)
        out = dst / rel
        packed = out / "traces.jsonl.gz"
        plain = run / "traces.jsonl"
        if packed.is_file() and plain.is_file() and count_lines(packed) > count_lines(plain):
            # a run started over here (--force) does not replace a longer stashed one
            done.append(f"{rel}: kept ({count_lines(packed)} traces stashed, "
                        f"{count_lines(plain)} here)")
            continue
        out.mkdir(parents=True, exist_ok=True)
        for name in RECORDS:
            if (run / name).is_file():
                shutil.copy2(run / name, out / name)
        if plain.is_file():
            gzip_to(plain, out / "traces.jsonl.gz")
        else:  # a run already packed
            shutil.copy2(run / "traces.jsonl.gz", out / "traces.jsonl.gz")
        n = count_lines(out / "traces.jsonl.gz")
        done.append(f"{rel}: {n} traces")
    for folder in adapters(src, include):
        rel = folder.relative_to(src)
        save_adapter(folder, dst / rel)
        done.append(f"{rel}: adapter in bfloat16")
    return done


def restore(src: Path, dst: Path) -> list[str]:
    """Back into ``dst``. A run there with at least as many traces is left alone; one with
    fewer is moved aside whole (``<folder>.before-restore-<time>``), not lost."""
    done = []
    for run in eval_runs(src):
        rel = run.relative_to(src)
        out = dst / rel
        packed = run / "traces.jsonl.gz"
        n = count_lines(packed)
        here = out / "traces.jsonl"
        if here.is_file() and count_lines(here) >= n:
            done.append(f"{rel}: kept ({count_lines(here)} traces here, {n} stashed)")
            continue
        if out.exists():
            out.replace(out.with_name(f"{out.name}.before-restore-{time.strftime('%Y%m%d-%H%M%S')}"))
        out.mkdir(parents=True, exist_ok=True)
        for name in RECORDS:
            if (run / name).is_file():
                shutil.copy2(run / name, out / name)
        with gzip.open(packed, "rb") as g, open(here, "wb") as f:
            shutil.copyfileobj(g, f)
        done.append(f"{rel}: {n} traces restored")
    for folder in adapters(src):
        rel = folder.relative_to(src)
        out = dst / rel
        if (out / "adapter_model.safetensors").is_file():
            done.append(f"{rel}: kept (an adapter is there)")
            continue
        shutil.copytree(folder, out, dirs_exist_ok=True)
        done.append(f"{rel}: adapter restored (bfloat16)")
    return done


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("action", choices=("save", "restore"))
    p.add_argument("src", type=Path)
    p.add_argument("dst", type=Path)
    p.add_argument("--include", action="append", default=None, metavar="GLOB",
                   help="save: only the runs and adapter folders whose path under SRC "
                        "matches (e.g. 'jade-ppo-b/checkpoints/iter-000003/policy'); "
                        "repeatable; default: all of them")
    args = p.parse_args(argv)
    if not args.src.is_dir():
        print(f"stash_runs: {args.src} is not a folder", file=sys.stderr)
        return 2
    done = (save(args.src, args.dst, args.include) if args.action == "save"
            else restore(args.src, args.dst))
    for line in done:
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
