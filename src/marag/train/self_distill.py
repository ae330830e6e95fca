"""Best-of-n self-distillation: rejection-sampled SFT over the training questions.

The current model (the backbone, with any ``--adapter`` merged) runs the configured method on
every training question ``n`` times with sampling (``temperature > 0``); each trace is
appended to ``OUT/samples.jsonl`` as it finishes. For each question the best sample is
chosen (:func:`best_per_question`) and kept when its F1 clears ``sft.min_f1``; the valid
steps of the kept samples (:func:`marag.train.sft.examples_from_traces`) are the SFT
examples.

* Seeds: ``sampling.seed`` is derived from ``sft.seed``, and the engine derives every call's
  seed from it, the question id and the sample number, so sample ``k`` of a question is the
  same whether it was drawn in one call or after a restart.
* Resumable: the (question, sample) pairs already in ``samples.jsonl`` are not run again
  (raising ``n`` draws only the new ones; lowering it uses the first ``n``). A line cut off
  by a kill is dropped. ``samples.json`` records what drew the samples (method, prompts,
  models and adapters, sampling); a later call under other settings is refused rather than
  mixing samples of two policies.
* A failed trace is a sample: it is kept in the file (not redrawn) and never chosen.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from marag.types import Question, Trace, append_jsonl

log = logging.getLogger(__name__)

SAMPLES = "samples.jsonl"
SETTINGS = "samples.json"


def rank_key(t: Trace) -> tuple[float, int, int, int]:
    """Sort key of a question's samples, best first: highest F1, then fewest malformed LLM
    steps, then fewest completion tokens (the shortest), then the first sample drawn."""
    invalid = sum(1 for s in t.steps if s.is_llm and not s.valid)
    return (-float(t.metrics.get("f1", 0.0)), invalid, t.cost.completion_tokens, t.sample)


def best_per_question(traces: Sequence[Trace], min_f1: float) -> list[Trace]:
    """Each question's best sample (:func:`rank_key`), in order of the questions' first
    sample that did not fail; a question whose best F1 is below ``min_f1`` (or whose samples
    all failed) gives none."""
    best: dict[str, Trace] = {}
    for t in traces:
        if t.status == "failed":
            continue
        now = best.get(t.id)
        if now is None or rank_key(t) < rank_key(now):
            best[t.id] = t
    return [t for t in best.values() if float(t.metrics.get("f1", 0.0)) >= min_f1]


def settings(config: Any, temperature: float) -> dict[str, Any]:
    """What decides the samples' distribution: the method's settings, the backends (models,
    adapters), the role map and the sampling (seed included)."""
    return {"method": config.method.model_dump(mode="json"),
            "llms": {k: v.model_dump(mode="json") for k, v in config.llms.items()},
            "roles": dict(config.roles), "temperature": temperature,
            "top_p": config.sampling.top_p, "seed": config.sft.seed}


def sampling_config(config: Any, temperature: float) -> Any:
    """``config`` with the sampling the samples are drawn under."""
    from marag.workflows.engine import derive_seed

    if temperature <= 0:
        raise ValueError(f"best-of-n sampling needs a temperature above 0, got {temperature}")
    cfg = config.model_copy(deep=True)
    cfg.sampling.temperature = temperature
    cfg.sampling.seed = derive_seed(config.sft.seed, "self-distill")
    return cfg


def read_samples(path: Path) -> list[Trace]:
    """The traces in ``path`` (none if it is missing); a last line cut off by a kill is
    removed from the file, so appending goes on from a whole line."""
    if not path.is_file():
        return []
    raw = path.read_bytes()
    out: list[Trace] = []
    good = 0
    for line in raw.splitlines(keepends=True):
        if line.strip():
            try:
                out.append(Trace.from_dict(json.loads(line)))
            except (ValueError, KeyError, TypeError):
                if good + len(line) < len(raw):  # not the last line: a real problem
                    raise ValueError(f"{path}: a malformed line at byte {good}") from None
                log.warning("%s: dropping a cut-off last line (%d bytes)", path, len(line))
                with open(path, "r+b") as f:
                    f.truncate(good)
                break
        good += len(line)
    return out


def check_settings(out: Path, now: dict[str, Any]) -> None:
    """Refuse to add samples of another policy or sampling to ``out``; record ``now``."""
    path = out / SETTINGS
    if path.is_file():
        before = json.loads(path.read_text(encoding="utf-8"))
        changed = sorted(k for k in set(before) | set(now) if before.get(k) != now.get(k))
        if changed:
            raise ValueError(f"{out}: its samples were drawn under other settings "
                             f"({', '.join(changed)}); pass a new --out, or delete "
                             f"{out / SAMPLES} and {path}")
    out.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(now, indent=1) + "\n", encoding="utf-8")


async def draw(questions: Sequence[Question], ctx: Any, n: int, path: Path, *,
               concurrency: int = 16, on_trace: Callable[[Trace], None] | None = None
               ) -> tuple[list[Trace], int]:
    """Samples ``0..n-1`` of every question with ``ctx`` (its config's method and sampling):
    those already in ``path`` are read, the others run and appended as each finishes.
    Returns the samples of ``questions`` (question order, then sample number) and how many
    were drawn in this call."""
    from marag.workflows import run_method

    if n < 1:
        raise ValueError(f"--samples must be at least 1, got {n}")
    have: dict[tuple[str, int], Trace] = {}
    for t in read_samples(path):
        have.setdefault((t.id, t.sample), t)
    jobs = [(q, k) for q in questions for k in range(n) if (q.id, k) not in have]
    limit = asyncio.Semaphore(concurrency)
    name = ctx.config.method.name

    async def one(q: Question, k: int) -> None:
        async with limit:
            t = await run_method(name, q, ctx, k)
        append_jsonl(path, t)  # flushed to disk: a kill loses at most the line in flight
        have[(q.id, k)] = t
        if on_trace is not None:
            on_trace(t)

    await asyncio.gather(*(one(q, k) for q, k in jobs))
    return [have[(q.id, k)] for q in questions for k in range(n)], len(jobs)


def self_distill(questions: Sequence[Question], ctx: Any, n: int, temperature: float,
                 out: Path, *, progress: bool = False) -> tuple[list[Any], dict[str, int]]:
    """Draw (or read) ``n`` samples of each question into ``out/samples.jsonl``, choose each
    question's best and return the examples of the kept ones and a tally (questions, samples
    drawn in this call, kept, dropped, examples). ``ctx`` holds the backends and retriever;
    its config's ``sft.min_f1``, ``sft.roles`` and ``sft.seed`` apply. The choices go to
    ``out/chosen.json`` (question id -> sample and F1)."""
    from tqdm import tqdm

    from marag.train.sft import examples_from_traces
    from marag.workflows.engine import Context

    config = ctx.config
    cfg = sampling_config(config, temperature)
    check_settings(out, settings(config, temperature))
    sampler = Context(llms=ctx.llms, config=cfg, retriever=ctx.retriever)
    path = out / SAMPLES
    bar = tqdm(total=len(questions) * n, disable=not progress, desc="samples", unit="trace")
    traces, drawn = asyncio.run(draw(questions, sampler, n, path,
                                     concurrency=config.eval.concurrency,
                                     on_trace=lambda _: bar.update(1)))
    bar.close()
    kept = best_per_question(traces, config.sft.min_f1)
    (out / "chosen.json").write_text(json.dumps(
        {t.id: {"sample": t.sample, "f1": t.metrics.get("f1", 0.0)} for t in kept},
        indent=1) + "\n", encoding="utf-8")
    examples = examples_from_traces(kept, config.sft.roles, config.sft.min_f1)
    tally = {"questions": len(questions), "drawn": drawn, "kept": len(kept),
             "dropped": len(questions) - len(kept), "examples": len(examples)}
    return examples, tally
