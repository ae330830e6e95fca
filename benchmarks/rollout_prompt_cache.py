"""A training rollout with and without ``train.rollout_cache_prompts`` on the hf backend.

    python benchmarks/rollout_prompt_cache.py --config configs/qwen/reader-grpo-fold-a.yaml \\
        --set train.questions_per_iteration=2 [--iteration 0] [--order off,on]

Builds the trainer of ``--config`` (model, adapters, LoRA; no update), then runs the rollout
of one iteration once per mode in ``--order``, the prefix cache of every hf backend (the
policy's and a frozen reader's) emptied before each, and prints per mode: seconds, the
prompt tokens the hf decoders computed (the rest came from their caches), where their time went,
and whether the sampled replies match the first mode's (the same seeds, so they should, up
to the rare token that float rounding of a cached prefix's KV turns).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time

# the hf decoders' time (DecodeStats, summed): prompt passes, decoding steps, rows stepped
TIMES = ("prefill_s", "prefix_s", "step_s", "steps", "step_rows", "choose_s", "merge_s")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", required=True)
    ap.add_argument("--set", dest="overrides", action="append", default=[])
    ap.add_argument("--iteration", type=int, default=0)
    ap.add_argument("--order", default="off,on", help="modes in turn: off, on (comma-separated)")
    ap.add_argument("--json", help="write the figures here too")
    args = ap.parse_args()

    from marag.config import load_config
    from marag.train.data import split_questions
    from marag.train.trainer import Trainer

    config = load_config(args.config, args.overrides)
    train, _ = split_questions(config.train)
    with tempfile.TemporaryDirectory() as out:
        trainer = Trainer(config, out, questions=train, tensorboard=False)
        # every distinct hf backend the rollout uses (a frozen reader may have its own)
        hf = list({id(b): b for b in trainer.ctx.llms.values()
                   if hasattr(b, "decode_stats")}.values())
        caches = [b._decoder.prefix_cache for b in hf if b._decoder.prefix_cache is not None]

        def totals() -> dict[str, float]:
            stats = [b.decode_stats for b in hf]
            t = {k: sum(getattr(st, k) for st in stats) for k in TIMES}
            t["computed"] = sum(st.prefill_tokens + st.prefix_tokens for st in stats)
            return t

        rows, first = [], None
        for mode in args.order.split(","):
            trainer.cfg.rollout_cache_prompts = mode == "on"
            for c in caches:
                c.clear()  # an empty prefix cache for each mode, on every backend
            t0_ = totals()
            t0 = time.perf_counter()
            traces = trainer.rollout(args.iteration)
            wall = time.perf_counter() - t0
            d = {k: v - t0_[k] for k, v in totals().items()}
            replies = [s.raw for t in traces for s in t.steps if s.is_llm]
            prompt = sum(s.prompt_tokens for t in traces for s in t.steps if s.is_llm)
            same = None if first is None else sum(a == b for a, b in zip(first, replies))
            first = first or replies
            row = {"mode": mode, "seconds": round(wall, 1), "traces": len(traces),
                   "llm_calls": len(replies), "prompt_tokens": prompt,
                   "computed": int(d["computed"]),
                   "replies_as_first_mode": same,
                   **{k: round(d[k], 1) for k in TIMES}}
            rows.append(row)
            print(json.dumps(row), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
