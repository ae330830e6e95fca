"""Score prompt variants per role on a development split (how marag's prompts are chosen).

For each variant of ``--role`` (``marag.roles.variants``; ``default`` is the shipped prompt), run
``--method`` on the development questions of each dataset with that variant set through
``method.role_prompts``, retrieving from that dataset's own corpus (as the FlashRAG peer does),
and report EM/F1/acc, the format-valid rate of every role that ran, prompt and completion
tokens per question and seconds per question (wall, all questions in flight together).

The development split is questions [offset, offset+n) of each ``../shared/data`` file: the
side-by-side with FlashRAG uses the first 50, so the default offset keeps them out.

    .venv/bin/python benchmarks/prompts.py --method vanilla --role AG \
        --variants default,zeroshot,zeroshot-best-last --out docs/results/prompts/ag-smollm2

writes ``OUT.json`` (every row, the command, versions) and ``OUT.md`` (the table). One model
is loaded once for all variants.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import sys
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

from marag.api import build_context
from marag.config import load_config
from marag.datasets import read_questions
from marag.eval.summary import role_validity, trace_cost, workflow_type
from marag.llm.factory import make_llms
from marag.metrics import score_trace
from marag.retrieval.factory import build_index
from marag.types import Trace, dumps
from marag.workflows import run_method
from marag.workflows.engine import Run

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


def dev_split(name: str, offset: int, n: int) -> list:
    qs = read_questions(DATA / f"{name}.questions.jsonl", dataset=name)
    return qs[offset:offset + n]


def index_for(name: str, cache: Path) -> Path:
    out = cache / f"{name}-bm25"
    if not (out / "manifest.json").exists():
        build_index(DATA / f"{name}.corpus.jsonl", out, show_progress=False)
    return out


async def plan_only(q, ctx) -> Trace:
    """The root planner call alone (``--method planner``): plan validity without running the
    plan, one call per question."""
    run = Run(ctx, q, "jade")
    root = run.add_node(q.question)
    p, _ = await run.call("planner", root.id, question=q.question, allow_decompose=True,
                          constrained=run.restricts("planner", "constrained_planner",
                                                    "plan codes"))
    root.workflow = list(p.value) if p.valid else ["(invalid)"]
    return run.trace


async def run_all(method: str, questions: list, ctx, concurrency: int) -> list[Trace]:
    gate = asyncio.Semaphore(concurrency)

    async def one(q) -> Trace:
        async with gate:
            if method == "planner":
                return await plan_only(q, ctx)
            return await run_method(method, q, ctx)

    return list(await asyncio.gather(*(one(q) for q in questions)))


def row(variant: str, dataset: str, traces: list[Trace], seconds: float, role: str) -> dict:
    n = len(traces)
    scores = [score_trace(t) for t in traces]
    costs = [trace_cost(t) for t in traces]
    validity = role_validity(traces)
    mix = Counter(workflow_type(t) for t in traces)

    def mean(key: str, rows: list[dict]) -> float:
        return sum(r[key] for r in rows) / n if n else 0.0

    return {
        "variant": variant, "dataset": dataset, "n": n,
        "failed": sum(t.status == "failed" for t in traces),
        "em": 100 * mean("em", scores), "f1": 100 * mean("f1", scores),
        "acc": 100 * mean("acc", scores),
        "valid": {r: 100 * v["rate"] for r, v in validity.items()},
        "role_valid": 100 * validity.get(role, {}).get("rate", 0.0),
        "prompt_tokens": mean("prompt_tokens", costs),
        "completion_tokens": mean("completion_tokens", costs),
        "s_per_q": seconds / n if n else 0.0,
        "workflows": dict(mix.most_common(4)),
        "examples": [{"q": t.question, "gold": t.golden_answers[:2], "answer": t.answer}
                     for t in traces[:5]],
    }


def markdown(rows: list[dict], role: str, header: str) -> str:
    lines = [header, "",
             (f"| variant | dataset | n | EM | F1 | acc | {role} valid % | other roles valid % "
              "| prompt tok/q | compl. tok/q | s/q | top workflows |"),
             "|---|---|---:|---:|---:|---:|---:|---|---:|---:|---:|---|"]
    for r in rows:
        others = ", ".join(f"{k} {v:.0f}" for k, v in r["valid"].items() if k not in (role, "R"))
        wf = ", ".join(f"{k} {v}" for k, v in r["workflows"].items())
        lines.append(
            f"| {r['variant']} | {r['dataset']} | {r['n']} | {r['em']:.1f} | {r['f1']:.1f} | "
            f"{r['acc']:.1f} | {r['role_valid']:.0f} | {others or '-'} | "
            f"{r['prompt_tokens']:.0f} | {r['completion_tokens']:.1f} | {r['s_per_q']:.2f} | "
            f"{wf} |")
    return "\n".join(lines) + "\n"


async def main(args: argparse.Namespace) -> None:
    method = "jade" if args.method == "planner" else args.method
    base = [f"method.name={method}", f"llms.default.model={args.model}", *args.set]
    cfg0 = load_config(args.config, base)
    llms = make_llms(cfg0)  # one model for every variant
    cache = Path(args.cache)
    rows: list[dict] = []
    for variant in args.variants.split(","):
        pick = [] if variant == "default" else [f"method.role_prompts.{args.role}={variant}"]
        for name in args.datasets.split(","):
            cfg = load_config(args.config, [*base, *pick,
                                             f"retrieval.index={index_for(name, cache)}"])
            ctx = build_context(cfg, llms=llms)
            qs = dev_split(name, args.offset, args.n)
            t0 = time.perf_counter()
            traces = await run_all(args.method, qs, ctx, args.concurrency)
            seconds = time.perf_counter() - t0
            if ctx.retriever is not None:
                ctx.retriever.close()
            if args.traces:  # every trace, to read what the model wrote
                tdir = Path(args.traces)
                tdir.mkdir(parents=True, exist_ok=True)
                (tdir / f"{variant}-{name}.jsonl").write_text(
                    "".join(dumps(t) + "\n" for t in traces))
            r = row(variant, name, traces, seconds, args.role)
            rows.append(r)
            print(f"{variant:28s} {name:9s} F1 {r['f1']:5.1f} acc {r['acc']:5.1f} "
                  f"{args.role} valid {r['role_valid']:5.1f} prompt {r['prompt_tokens']:5.0f} "
                  f"s/q {r['s_per_q']:.2f}", flush=True)
            write(args, rows, llms)  # after every row: a long run killed midway keeps them
    for llm in {id(v): v for v in llms.values()}.values():
        await llm.aclose()
    print(Path(args.out + ".md").read_text())


def write(args: argparse.Namespace, rows: list[dict], llms: dict) -> None:
    command = "python " + " ".join(sys.argv)
    dtypes = sorted({str(getattr(v, "dtype", "?")).replace("torch.", "") for v in llms.values()})
    header = (f"# {args.role} prompt variants: {args.method}, {args.model}\n\n"
              f"- command: `{command}`\n"
              f"- development split: questions {args.offset}..{args.offset + args.n - 1} of "
              f"{args.datasets} (../shared/data), BM25 over each dataset's own corpus\n"
              f"- greedy decoding, {args.concurrency} questions in flight, dtype "
              f"{', '.join(dtypes)}; {datetime.now(UTC):%Y-%m-%d} on {platform.machine()} "
              "(2-core shared box: s/q includes other jobs' load)")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    # names like "qwen2.5-coder-0.5b-jade" hold dots: add the suffix, never replace one
    out.with_name(out.name + ".json").write_text(json.dumps(
        {"command": command, "method": args.method, "model": args.model, "dtype": dtypes,
         "rows": rows}, indent=1, ensure_ascii=False) + "\n")
    out.with_name(out.name + ".md").write_text(markdown(rows, args.role, header))


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--method", default="vanilla",
                   help="a method, or 'planner': the root planner call alone")
    p.add_argument("--role", default="AG")
    p.add_argument("--variants", default="default")
    p.add_argument("--datasets", default="nq_open,hotpotqa")
    p.add_argument("--offset", type=int, default=100)
    p.add_argument("--n", type=int, default=50)
    p.add_argument("--model", default="smollm2")
    p.add_argument("--config", default=None)
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--concurrency", type=int, default=8)
    p.add_argument("--cache", default="runs/prompts")
    p.add_argument("--out", default="runs/prompts/result")
    p.add_argument("--traces", default=None, metavar="DIR",
                   help="also write each variant's traces to DIR/VARIANT-DATASET.jsonl")
    return p.parse_args(argv)


if __name__ == "__main__":
    asyncio.run(main(parse_args()))
