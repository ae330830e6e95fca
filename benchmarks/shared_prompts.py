"""``train.share_prompts`` against the plain forward on one real iteration's transitions.

    python benchmarks/shared_prompts.py --config configs/qwen/jade-train.yaml \\
        --rollout docs/results/qwen-runs/jade-2b/rollouts/iter-000005.jsonl.gz [--repeats 2]

Builds the trainer of ``--config`` (model, LoRA, value head; no rollout), turns the rollout
file's traces into transitions with the config's rewards, then times, alternating plain and
shared, ``Learner.score`` (old logprobs and values) and ``Learner.update`` (one PPO epoch,
the config's mini-batches; micro-batches of ``--micro`` transitions for both) in the
learner's dtype. Prints tokens the model ran per phase and the seconds of each, and how far
the shared scores lie from the plain ones. The update changes the weights, so each run
starts from the same saved weights and optimizer state.
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
import tempfile
import time
from typing import Any

import torch


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", required=True)
    ap.add_argument("--rollout", required=True)
    ap.add_argument("--set", dest="overrides", action="append", default=[])
    ap.add_argument("--limit", type=int, help="the first N traces only")
    ap.add_argument("--micro", type=int, default=4)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--json", help="write the figures here too")
    args = ap.parse_args()

    from marag.config import load_config
    from marag.train.experience import collect
    from marag.train.rewards import step_rewards
    from marag.train.trainer import Trainer
    from marag.types import Question, Trace, read_jsonl

    cfg = load_config(args.config, ["train.iterations=1", "train.save_rollouts=false",
                                    f"train.micro_batch_size={args.micro}",
                                    f"train.score_micro_batch_size={2 * args.micro}",
                                    *args.overrides])
    traces = read_jsonl(args.rollout, Trace)[:args.limit]
    with tempfile.TemporaryDirectory() as out:
        tr = Trainer(cfg, out, questions=[Question("q", "q?", ["a"], "x")], tensorboard=False)
        lr = tr.learner
        rewards = [step_rewards(t, cfg.train.rewards) for t in traces]
        base = collect(traces, rewards, tr.roles)
        start = {k: v.detach().clone() for k, v in lr.policy.state_dict().items()}
        opt_state = copy.deepcopy(lr.optimizer.state_dict())

        def reset() -> None:
            lr.policy.load_state_dict(start)
            lr.optimizer.load_state_dict(copy.deepcopy(opt_state))

        def run(share: bool) -> tuple[float, float, list[Any]]:
            lr.cfg.share_prompts = share
            items = copy.deepcopy(base)
            reset()  # both sides score and update from the same weights
            t0 = time.perf_counter()
            lr.score(items)
            t1 = time.perf_counter()
            for t in items:
                n = len(t.response_ids)
                t.advantages = torch.full((n,), 0.1)
                t.returns = torch.full((n,), t.reward)
            reset()
            lr.update(items, lambda epoch: 0)
            return t1 - t0, time.perf_counter() - t1, items

        times: dict[str, dict[str, list[float]]] = {"plain": {"score": [], "update": []},
                                                     "shared": {"score": [], "update": []}}
        scored: dict[str, list[Any]] = {}
        for _ in range(args.repeats):
            for name in ("plain", "shared"):
                s, u, items = run(name == "shared")
                times[name]["score"].append(s)
                times[name]["update"].append(u)
                scored[name] = items
        reset()
    prompts = {tuple(t.prompt_ids) for t in base}
    gap = max(float((a.old_logprobs - b.old_logprobs).abs().max())
              for a, b in zip(scored["plain"], scored["shared"]))
    result = {
        "transitions": len(base), "distinct_prompts": len(prompts),
        "tokens_plain": sum(t.length for t in base),
        "tokens_shared_upper_bound": sum(len(p) for p in prompts)
        + sum(len(t.response_ids) for t in base),
        "micro_batch_size": args.micro, "dtype": str(lr.dtype),
        **{f"{name}.{phase}_s": round(statistics.median(v), 2)
           for name, phases in times.items() for phase, v in phases.items()},
        "max_old_logprob_gap": gap,
    }
    for phase in ("score", "update"):
        result[f"speedup.{phase}"] = round(result[f"plain.{phase}_s"]
                                           / result[f"shared.{phase}_s"], 2)
    print(json.dumps(result, indent=1))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
