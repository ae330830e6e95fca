"""A training rollout with and without ``train.rollout_cache_prompts`` on the hf backend.

    python benchmarks/rollout_prompt_cache.py --config configs/qwen/reader-grpo-fold-a.yaml \\
        --set train.questions_per_iteration=2 [--iteration 0] [--order off,on]

Builds the trainer of ``--config`` (model, adapters, LoRA; no update), then runs the rollout
of one iteration once per mode in ``--order``, the decoder's prefix cache emptied before
each, and prints per mode: seconds, the prompt tokens the decoder computed and served from
its cache, where the policy decoder's time went, and whether the sampled replies match the first mode's (the same seeds, so they
should, up to the rare token that float rounding of a cached prefix's KV turns).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time

# the policy decoder's own time (DecodeStats): prompt passes, decoding steps, rows stepped
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
        decoder = trainer.backend._decoder  # its cache statistics
        rows, first = [], None
        for mode in args.order.split(","):
            trainer.cfg.rollout_cache_prompts = mode == "on"
            trainer.backend.weights_updated()  # an empty prefix cache for each mode
            cache = decoder.prefix_cache
            st = decoder.stats
            before = (cache.reused_tokens if cache else 0, st.prefill_tokens + st.prefix_tokens)
            times0 = {k: getattr(st, k) for k in TIMES}
            t0 = time.perf_counter()
            traces = trainer.rollout(args.iteration)
            wall = time.perf_counter() - t0
            replies = [s.raw for t in traces for s in t.steps if s.is_llm]
            prompt = sum(s.prompt_tokens for t in traces for s in t.steps if s.is_llm)
            reused = (cache.reused_tokens - before[0]) if cache else 0
            computed = st.prefill_tokens + st.prefix_tokens - before[1]
            same = None if first is None else sum(a == b for a, b in zip(first, replies))
            first = first or replies
            row = {"mode": mode, "seconds": round(wall, 1), "traces": len(traces),
                   "llm_calls": len(replies), "prompt_tokens": prompt,
                   "computed": computed, "served_from_cache": reused,
                   "replies_as_first_mode": same,
                   **{k: round(getattr(st, k) - v, 1) for k, v in times0.items()}}
            rows.append(row)
            print(json.dumps(row), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
