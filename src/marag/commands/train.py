"""``marag train``: train the shared backbone with the method's own rewards (PPO / GRPO).

Rerunning the same command with the same ``--out`` continues from the last checkpoint.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from marag.commands.options import add_run_options, load_run_config, run_overrides

HELP = "train the shared LLM backbone of a method with reinforcement learning"


def register(sub: Any) -> None:
    p = sub.add_parser("train", help=HELP, description=HELP + ". Rerun the same command to "
                       "resume from the last checkpoint in --out.")
    add_run_options(p, index_help="retrieval index used during rollouts")
    p.add_argument("--out", required=True, metavar="DIR", help="run folder (e.g. runs/train/A)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--force", action="store_true",
                   help="continue a run whose saved config differs (e.g. keys a newer marag "
                        "added); the last checkpoint is still resumed from")
    p.add_argument("--seeds", type=int, default=None, metavar="N",
                   help="train N runs, train.seed 0..N-1, into OUT/seed-K one after the other "
                        "(stability across seeds: marag report-stability); rerun to resume")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.seeds is not None:
        if args.seeds < 1:
            print("marag train: --seeds must be >= 1", file=sys.stderr)
            return 2
        for one in seed_runs(args):
            code = run(one)
            if code:
                return code
        return 0
    import yaml

    from marag.train.data import split_questions
    from marag.train.topology import check_topology

    config = load_run_config(args, run_overrides(args) + list(args.overrides))
    # llms entries that cannot train together: refused before a model or index loads
    check_topology(config)
    out = Path(args.out)
    text = yaml.safe_dump(config.model_dump(mode="json"), sort_keys=False)
    saved = out / "config.yaml"
    if saved.is_file() and saved.read_text() != text and not args.force \
            and not _only_longer(yaml.safe_load(saved.read_text()) or {},
                                 config.model_dump(mode="json")):
        from marag.eval.rundir import describe_change

        changes = describe_change(yaml.safe_load(saved.read_text()) or {},
                                  config.model_dump(mode="json"))
        print(f"marag train: {out} holds a run with another config ({saved}): "
              + "; ".join(changes[:8]) + ". Use the same config to resume, another --out, "
              "or --force to continue anyway", file=sys.stderr)
        return 2
    try:
        train, held = split_questions(config.train)
    except (ValueError, FileNotFoundError) as e:
        print(f"marag train: {e}", file=sys.stderr)
        return 2
    from marag.train.trainer import Trainer
    from marag.types import write_jsonl

    trainer = Trainer(config, out, questions=train, eval_questions=held)
    if trainer.acc.is_main_process:
        out.mkdir(parents=True, exist_ok=True)
        saved.write_text(text)
        splits = out / "splits"
        splits.mkdir(exist_ok=True)
        (splits / "train_ids.txt").write_text("".join(q.id + "\n" for q in train))
        (splits / "heldout_ids.txt").write_text("".join(q.id + "\n" for q in held))
        write_jsonl(splits / "train.jsonl", train)
        if held:
            write_jsonl(splits / "heldout.jsonl", held)
    rows = trainer.run(progress=not args.no_progress)
    trainer.export(out / "policy")  # every process: under FSDP they gather the shards
    if trainer.acc.is_main_process:
        last = rows[-1] if rows else None
        if last is not None:
            print(f"iteration {last['iteration']}: reward {last['reward']:.3f}, "
                  f"F1 {last['f1']:.3f}; policy in {out / 'policy'}")
        else:
            print(f"nothing to do: {out} is at iteration {trainer.start}")
    # every process leaves the process group together; a rank that exits with the group's
    # threads still running aborts ("terminate called without an active exception")
    trainer.acc.wait_for_everyone()
    trainer.acc.end_training()
    return 0


def seed_runs(args: argparse.Namespace) -> list[argparse.Namespace]:
    """``--seeds N``: the N single runs, train.seed K into OUT/seed-K (an override given on
    the command line for train.seed is overridden by K)."""
    base = Path(args.out)
    return [argparse.Namespace(**{**vars(args), "seeds": None, "out": str(base / f"seed-{k}"),
                                  "overrides": [*args.overrides, f"train.seed={k}"]})
            for k in range(args.seeds)]


def _only_longer(saved: dict, now: dict) -> bool:
    """Whether the two configs differ in ``train.iterations`` alone: a run is extended (or
    stopped earlier) by resuming it with another iteration count, e.g. while its evaluation F1
    still improves. A setting that a newer marag added, at its default, is no difference: the
    saved config is read as today's marag reads it."""
    def without(cfg: dict) -> dict:
        train = {k: v for k, v in (cfg.get("train") or {}).items() if k != "iterations"}
        return {**cfg, "train": train}

    return without(_as_today(saved)) == without(now)


def _as_today(saved: dict) -> dict:
    """A saved config with the settings added since it was written at their defaults (as it
    is, when it no longer validates)."""
    from pydantic import ValidationError

    from marag.config import Config

    try:
        return Config.model_validate(saved).model_dump(mode="json")
    except ValidationError:
        return saved

