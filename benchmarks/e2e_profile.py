"""Where a question's time goes, end to end, on the local hf backend.

Each setting runs in a fresh child process (so its model load is timed like a user's
``marag eval``): load the config's backends and index, then ``evaluate`` the first N
questions of a dataset with the given method. Reported per setting:

- wall: model + index load, then the run; decoder busy time split into prefix-cache misses
  (computing shared prefixes), prefill (the rest of the prompts), decode steps, token
  choice/stop checks and batch merges; "idle" is the run's wall minus the busy time (the
  worker waiting for requests: retrieval, parsing, workflow code, ``batch_wait_ms``);
- per question (means): seconds in LLM calls split into queueing (until the request's
  prefill began), prefill and decode, as each request saw them; seconds in retrieval; the
  rest of the question's wall (parsing, prompt building, scheduling);
- tokens: prompt tokens per question, the prefill cells actually computed (padded) against
  the real ones, prefix-cache hits/misses and the prompt tokens the cache saved.

    PYTHONPATH=src .venv/bin/python benchmarks/e2e_profile.py --dataset q.jsonl --index DIR \\
        --methods vanilla,jade --limit 16 --settings float32:8:8 bfloat16:8:8 bfloat16:16:16

A setting is ``DTYPE:MAX_BATCH_SIZE:CONCURRENCY[:THREADS[:BATCH_WAIT_MS]]``; ``--set`` adds
config overrides to every setting. Prints one markdown table per method and, with
``--json``, writes the raw figures.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any


def parse_setting(text: str) -> dict[str, Any]:
    parts = text.split(":")
    if not 3 <= len(parts) <= 5:
        raise SystemExit(f"setting {text!r}: want DTYPE:BATCH:CONCURRENCY[:THREADS[:WAIT_MS]]")
    out: dict[str, Any] = {"dtype": parts[0], "batch": int(parts[1]),
                           "concurrency": int(parts[2])}
    out["threads"] = int(parts[3]) if len(parts) > 3 and parts[3] else None
    out["wait_ms"] = float(parts[4]) if len(parts) > 4 else None
    return out


async def one_run(args: argparse.Namespace, method: str, setting: dict[str, Any]) -> dict:
    from marag.api import build_context
    from marag.config import load_config
    from marag.datasets import load_questions
    from marag.eval import evaluate
    from marag.workflows import run_method

    overrides = [f"method.name={method}", f"retrieval.index={args.index}",
                 f"llms.default.dtype={setting['dtype']}",
                 f"llms.default.max_batch_size={setting['batch']}", *args.set]
    if setting["threads"]:
        overrides.append(f"llms.default.n_threads={setting['threads']}")
    if setting["wait_ms"] is not None:
        overrides.append(f"llms.default.batch_wait_ms={setting['wait_ms']}")
    config = load_config(overrides=overrides)
    questions = load_questions(args.dataset)[: args.limit]
    t0 = time.perf_counter()
    ctx = build_context(config)
    load_s = time.perf_counter() - t0
    backend = ctx.llms["default"]
    backend.request_log = []

    async def run(q: Any, c: Any) -> Any:
        return await run_method(method, q, c)

    with tempfile.TemporaryDirectory() as tmp:
        t1 = time.perf_counter()
        result = await evaluate(questions, run, ctx, Path(tmp) / "run", method_name=method,
                                concurrency=setting["concurrency"])
        run_s = time.perf_counter() - t1
        from marag.eval.load import load_run

        traces = load_run(Path(tmp) / "run").traces
    await ctx.aclose()
    n = len(traces)
    stats = backend.decode_stats.as_dict()
    cache = backend._decoder.prefix_cache
    log = backend.request_log
    per_q = {"wall": sum(t.cost.seconds for t in traces) / n,
             "retrieval": sum(s.latency for t in traces for s in t.steps if not s.is_llm) / n,
             "llm": sum(s.latency for t in traces for s in t.steps if s.is_llm) / n,
             "wait": sum(r.wait for r in log) / n, "prefill": sum(r.prefill for r in log) / n,
             "decode": sum(r.decode for r in log) / n,
             "llm_calls": len(log) / n,
             "prompt_tokens": sum(r.prompt_tokens for r in log) / n,
             "completion_tokens": sum(r.completion_tokens for r in log) / n}
    per_q["other"] = per_q["wall"] - per_q["llm"] - per_q["retrieval"]
    busy = sum(stats[k] for k in ("prefix_s", "prefill_s", "step_s", "choose_s", "merge_s"))
    return {"method": method, "setting": setting, "n": n, "dtype": backend.dtype,
            "threads": backend.threads, "f1": result.summary["f1"],
            "acc": result.summary["acc"], "load_s": load_s, "run_s": run_s,
            "busy_s": busy, "idle_s": run_s - busy,
            "stats": stats, "per_q": per_q,
            "prefix": {"hits": cache.hits if cache else 0, "misses": cache.misses if cache else 0,
                       "partial_hits": getattr(cache, "partial_hits", 0) if cache else 0,
                       "reused_tokens": cache.reused_tokens if cache else 0,
                       "evictions": getattr(cache, "evictions", 0) if cache else 0}}


def child(args: argparse.Namespace) -> None:
    out = asyncio.run(one_run(args, args.methods, parse_setting(args.one)))
    print("RESULT " + json.dumps(out), flush=True)


def table(rows: list[dict[str, Any]]) -> str:
    head = ["dtype", "batch", "conc", "thr", "wall s", "load s", "run s", "q/s (with load)",
            "prefix s", "prefill s", "decode s", "choose+merge s", "idle s",
            "per q: queue", "prefill", "decode", "retrieval", "other",
            "prompt tok/q", "prefill tok real/padded", "prefix hits/partial/misses (tok saved) evicted",
            "mean decode batch", "F1", "acc"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---:|" * len(head)]
    for r in rows:
        s, p, st, pc = r["setting"], r["per_q"], r["stats"], r["prefix"]
        mean_batch = st["step_rows"] / st["steps"] if st["steps"] else 0.0
        cells = [r["dtype"], s["batch"], s["concurrency"], r["threads"],
                 f"{r['wall_s']:.1f}", f"{r['load_s']:.1f}", f"{r['run_s']:.1f}",
                 f"{r['n'] / r['wall_s']:.3f}", f"{st['prefix_s']:.1f}",
                 f"{st['prefill_s']:.1f}", f"{st['step_s']:.1f}",
                 f"{st['choose_s'] + st['merge_s']:.1f}", f"{r['idle_s']:.1f}",
                 f"{p['wait']:.2f}", f"{p['prefill']:.2f}", f"{p['decode']:.2f}",
                 f"{p['retrieval']:.3f}", f"{p['other']:.3f}", f"{p['prompt_tokens']:.0f}",
                 f"{st['prefill_tokens']}/{st['prefill_padded']}",
                 (f"{pc['hits']}/{pc.get('partial_hits', 0)}/{pc['misses']} "
                  f"({pc['reused_tokens']}) {pc.get('evictions', 0)}"),
                 f"{mean_batch:.1f}", f"{100 * r['f1']:.1f}", f"{100 * r['acc']:.1f}"]
        lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dataset", required=True, help="questions .jsonl or a benchmark name")
    ap.add_argument("--index", required=True)
    ap.add_argument("--methods", default="vanilla,jade")
    ap.add_argument("--limit", type=int, default=16, help="the first N questions")
    ap.add_argument("--settings", nargs="+", default=["float32:8:8", "bfloat16:8:8"])
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--json", default=None, help="write the raw figures here")
    ap.add_argument("--one", default=None, help=argparse.SUPPRESS)  # child mode
    args = ap.parse_args()
    if args.one:
        child(args)
        return
    rows = []
    for setting in args.settings:
        parse_setting(setting)  # fail before any child starts
    for method in args.methods.split(","):
        for setting in args.settings:
            cmd = [sys.executable, __file__, "--dataset", args.dataset, "--index", args.index,
                   "--methods", method, "--limit", str(args.limit), "--one", setting]
            for item in args.set:
                cmd += ["--set", item]
            t0 = time.perf_counter()
            proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
            wall = time.perf_counter() - t0
            got = [json.loads(line[7:]) for line in proc.stdout.splitlines()
                   if line.startswith("RESULT ")]
            if proc.returncode or not got:
                sys.exit(f"{method} {setting} failed:\n{proc.stderr[-3000:]}")
            got[0]["wall_s"] = wall  # the whole process: imports, model load, run
            print(f"{method} {setting}: wall {wall:.1f} s", file=sys.stderr, flush=True)
            rows += got
    for method in args.methods.split(","):
        print(f"\n### {method}\n")
        print(table([r for r in rows if r["method"] == method]))
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
