"""One model behind ``marag ask``: load time, seconds per question and peak RSS.

The model is loaded once (its safetensors cache must exist: an embedded name, or an opt-in
one after ``marag models install``), then the questions are asked one after another through
the same context, as ``marag ask`` would answer each. Prints one line per question (answer,
workflow, tokens, seconds) and a summary; ``--json FILE`` writes the same as JSON.

    python benchmarks/model_ask.py --model qwen2.5-coder-0.5b [--dtype bfloat16]
        [--method vanilla] [--threads 2] [--question "..." ...]

``--dtypes float32,bfloat16 --prefill 740`` instead loads the model once per dtype and times
raw forward passes, alternating the dtypes ``--repeat`` times so that a shared, drifting CPU
slows both alike: a prefill of that many tokens (no cache) and 16 one-token decode steps on
its cache. Greedy next tokens after the prefill are compared across dtypes.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import time
from pathlib import Path

QUESTIONS = ["Who wrote the play Hamlet?", "What is the capital of Australia?",
             "Who painted the Mona Lisa?", "Which planet is known as the Red Planet?"]


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


async def run(args: argparse.Namespace) -> dict:
    from marag.api import ask_async, build_context, resolve_config

    overrides = [f"llms.default.model={args.model}", f"llms.default.dtype={args.dtype}",
                 f"method.name={args.method}"]
    if args.threads:
        overrides.append(f"llms.default.n_threads={args.threads}")
    config = resolve_config(None, overrides)
    t0 = time.perf_counter()
    ctx = build_context(config)
    load_s = time.perf_counter() - t0
    rss_after_load = peak_rss_mib()
    rows = []
    try:
        for q in args.question or QUESTIONS:
            t = time.perf_counter()
            trace = await ask_async(q, context=ctx)
            seconds = time.perf_counter() - t
            prompt, gen = trace.cost.prompt_tokens, trace.cost.completion_tokens
            roles = [(s.role, s.valid) for s in trace.steps if s.is_llm]
            rows.append({"question": q, "answer": trace.answer, "status": trace.status,
                         "llm_calls": roles, "prompt_tokens": prompt, "gen_tokens": gen,
                         "raw": [s.raw for s in trace.steps if s.is_llm],
                         "seconds": round(seconds, 2)})
            print(f"{seconds:6.1f}s  {prompt:5d}+{gen:3d} tok  {roles} {q} -> {trace.answer!r}",
                  flush=True)
    finally:
        await ctx.aclose()
    total = sum(r["seconds"] for r in rows)
    summary = {"model": args.model, "dtype": args.dtype, "method": args.method,
               "load_s": round(load_s, 1), "questions": len(rows),
               "s_per_question": round(total / max(len(rows), 1), 2),
               "rss_after_load_mib": round(rss_after_load), "peak_rss_mib": round(peak_rss_mib()),
               "rows": rows}
    print(f"load {summary['load_s']} s; {summary['s_per_question']} s/question over "
          f"{len(rows)}; peak RSS {summary['peak_rss_mib']} MiB "
          f"(after load {summary['rss_after_load_mib']} MiB)")
    return summary


def forward_times(args: argparse.Namespace) -> dict:
    import statistics

    import torch

    from marag.llm.embedded import resolve_model

    if args.threads:
        torch.set_num_threads(args.threads)
    dtypes = args.dtypes.split(",")
    models = {d: resolve_model(args.model, dtype=d)[0] for d in dtypes}
    ids = torch.randint(1000, 20000, (1, args.prefill), generator=torch.Generator().manual_seed(0))
    times: dict[str, dict[str, list[float]]] = {d: {"prefill": [], "decode": []} for d in dtypes}
    firsts: dict[str, int] = {}
    with torch.inference_mode():
        for _ in range(args.repeat):
            for d, model in models.items():
                t = time.perf_counter()
                out = model(ids, use_cache=True)
                times[d]["prefill"].append(time.perf_counter() - t)
                past, nxt = out.past_key_values, out.logits[:, -1].argmax(-1, keepdim=True)
                firsts[d] = int(nxt)
                t = time.perf_counter()
                for _step in range(16):
                    out = model(nxt, past_key_values=past, use_cache=True)
                    past, nxt = out.past_key_values, out.logits[:, -1].argmax(-1, keepdim=True)
                times[d]["decode"].append((time.perf_counter() - t) / 16)
                print(f"{d:9s} prefill {args.prefill} tok {times[d]['prefill'][-1]:6.2f} s, "
                      f"decode {1000 * times[d]['decode'][-1]:6.1f} ms/token", flush=True)
    summary = {d: {k: round(statistics.median(v), 3) for k, v in t.items()}
               for d, t in times.items()}
    summary["first_greedy_token"] = firsts
    print(json.dumps(summary))
    return summary


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="smollm2")
    p.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    p.add_argument("--method", default="vanilla")
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--question", action="append", default=[])
    p.add_argument("--json", type=Path, default=None)
    p.add_argument("--dtypes", default=None, help="e.g. float32,bfloat16: forward timings only")
    p.add_argument("--prefill", type=int, default=740)
    p.add_argument("--repeat", type=int, default=3)
    args = p.parse_args()
    summary = forward_times(args) if args.dtypes else asyncio.run(run(args))
    if args.json:
        args.json.write_text(json.dumps(summary, indent=1, ensure_ascii=False), encoding="utf-8")


if __name__ == "__main__":
    main()
