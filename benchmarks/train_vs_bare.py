"""The trainer's scoring and update phases against a bare PyTorch loop on the same batches.

    python benchmarks/train_vs_bare.py --config configs/jade-train.yaml \
        --set llms.default.model=qwen2.5-coder-0.5b --out /tmp/bench-train [--repeats 2]

One process, one run: a real ``marag train`` iteration (rollout, score, logprobs,
advantages, update, sync: its seconds per phase are printed), whose transitions are kept.
Then, alternating, on those transitions:

* **scoring**: ``Learner.score`` against a bare no-grad forward (the model's own forward,
  logits only for the response positions) over the same length-sorted micro-batches;
* **update**: ``Learner.update`` (one PPO epoch) against a bare fwd+bwd+AdamW step
  (cross-entropy on the response tokens, the same LoRA parameters, the same micro-batches
  and mini-batches).

Both sides run in the learner's dtype (``train.dtype``; bf16 autocast where the CPU has bf16
units). Throughput is prompt+response tokens of the transitions per second. Also prints how
far bf16 scoring lies from float32 on these transitions (old, reference logprobs).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any

import torch


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", required=True)
    ap.add_argument("--set", dest="overrides", action="append", default=[])
    ap.add_argument("--out", required=True)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--json", help="write the figures here too")
    args = ap.parse_args()

    from marag.config import load_config
    from marag.train.data import split_questions
    from marag.train.trainer import Trainer

    cfg = load_config(args.config, ["train.iterations=1", "train.save_rollouts=false",
                                    *args.overrides])
    train, _ = split_questions(cfg.train)
    tr = Trainer(cfg, args.out, questions=train, tensorboard=False)
    kept: list[Any] = []
    real_update = tr.learner.update

    def keep(transitions: list[Any], seed: Any) -> dict[str, float]:
        kept.extend(transitions)
        return real_update(transitions, seed)

    tr.learner.update = keep  # type: ignore[method-assign]
    t0 = time.perf_counter()
    row = tr.iteration(0)
    wall = time.perf_counter() - t0
    tr.learner.update = real_update  # type: ignore[method-assign]
    phases = {k.removeprefix("seconds."): v for k, v in row.items() if k.startswith("seconds.")}
    tokens = sum(t.length for t in kept)
    print(f"iteration: {row['traces']} traces, {row['transitions']} transitions, "
          f"{tokens} prompt+response tokens, {wall:.1f} s")
    for k, v in phases.items():
        print(f"  {k:<11} {v:7.1f} s")

    lr = tr.learner
    out: dict[str, Any] = {"iteration_s": wall, "phases": phases, "tokens": tokens,
                           "transitions": len(kept), "dtype": str(lr.dtype)}
    bare_score, ours_score, bare_upd, ours_upd = [], [], [], []
    for _ in range(args.repeats):
        bare_score.append(_timed(lambda: bare_forward(lr, kept)))
        ours_score.append(_timed(lambda: lr.score(kept)))
        bare_upd.append(_timed(lambda: bare_update(lr, kept)))
        ours_upd.append(_timed(lambda: lr.update(kept, lambda epoch: 0)))
    for name, bare, ours in (("scoring", bare_score, ours_score),
                             ("update", bare_upd, ours_upd)):
        b, o = statistics.median(bare), statistics.median(ours)
        out[name] = {"bare_s": bare, "marag_s": ours, "bare_tok_s": tokens / b,
                     "marag_tok_s": tokens / o, "ratio": b / o}
        print(f"{name}: bare {tokens / b:.0f} tok/s ({b:.1f} s), marag {tokens / o:.0f} tok/s "
              f"({o:.1f} s): {b / o:.2f}x the bare loop's throughput")
    if lr.dtype == torch.bfloat16:
        out["bf16_vs_fp32"] = bf16_gap(lr, kept)
        print("bf16 against float32 scoring (nats per token): " + json.dumps(out["bf16_vs_fp32"]))
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))


def _timed(fn: Any) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def _chunks(items: list[Any], size: int) -> list[list[Any]]:
    return [items[i:i + size] for i in range(0, len(items), size)]


def _hf_forward(lr: Any, items: list[Any]) -> tuple[torch.Tensor, Any]:
    """The model's own forward (no value head), logits for the response positions only."""
    b = lr._batch(items)
    lm = lr.policy.causal_lm()
    pos = (b.attention_mask.cumsum(-1) - 1).clamp(min=0)
    logits = lm(input_ids=b.input_ids, attention_mask=b.attention_mask, position_ids=pos,
                logits_to_keep=b.keep + 1, use_cache=False).logits[:, :-1]
    return logits, b


@torch.no_grad()
def bare_forward(lr: Any, kept: list[Any]) -> None:
    lr.policy.eval()
    items = sorted(kept, key=lambda t: t.length)
    for chunk in _chunks(items, lr.cfg.score_micro_batch_size):
        with lr.autocast():
            logits, b = _hf_forward(lr, chunk)
            torch.log_softmax(logits.float(), -1).gather(-1, b.response_ids.unsqueeze(-1))


def bare_update(lr: Any, kept: list[Any]) -> None:
    """Cross-entropy on the response tokens, AdamW on the same LoRA parameters, the same
    mini-batch and micro-batch sizes (a second optimizer: the learner's state is untouched)."""
    params = lr.policy_params
    opt = torch.optim.AdamW(params, lr=1e-6)
    lr.policy.train()
    mb, micro = lr.cfg.minibatch_size, lr.cfg.micro_batch_size
    for m in range(0, len(kept), mb):
        group = sorted(kept[m:m + mb], key=lambda t: t.length)
        n = sum(len(t.response_ids) for t in group)
        for chunk in _chunks(group, micro):
            with lr.autocast():
                logits, b = _hf_forward(lr, chunk)
                logp = torch.log_softmax(logits.float(), -1).gather(
                    -1, b.response_ids.unsqueeze(-1)).squeeze(-1)
                loss = -(logp * b.mask).sum() / n
            loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)


def bf16_gap(lr: Any, kept: list[Any]) -> dict[str, float]:
    """Old and reference logprobs scored in bf16 and in float32, same weights."""
    import copy

    a = [copy.copy(t) for t in kept]
    lr.score(a)
    dtype = lr.dtype
    lr.dtype = torch.float32
    b = [copy.copy(t) for t in kept]
    lr.score(b)
    lr.dtype = dtype
    out = {}
    for key in ("old_logprobs", "ref_logprobs", "values"):
        if getattr(a[0], key) is None:
            continue
        d = torch.cat([(getattr(x, key) - getattr(y, key)).abs() for x, y in zip(a, b)])
        out[f"{key}.mean"] = float(d.mean())
        out[f"{key}.p99"] = float(d.quantile(0.99))
        out[f"{key}.max"] = float(d.max())
    return out


if __name__ == "__main__":
    main()
