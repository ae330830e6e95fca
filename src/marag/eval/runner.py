"""Concurrent, resumable evaluation of one method over a question set.

``evaluate`` runs any ``async (Question, context) -> Trace`` function with bounded
concurrency on one event loop, appends each trace to ``traces.jsonl`` the moment it
finishes, and skips questions a previous (possibly killed) run already recorded. A question
whose method raises is recorded as a failed trace, never dropped.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import time
import traceback
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from marag.eval.run_markdown import run_markdown
from marag.eval.rundir import METRICS, REPORT, RunDir, ids_digest, open_run_dir
from marag.eval.summary import summarize, trace_cost
from marag.metrics import Scorer, score, score_trace
from marag.types import Question, Trace

log = logging.getLogger(__name__)

MethodFn = Callable[[Question, Any], Awaitable[Trace]]


@dataclass
class EvalResult:
    out_dir: Path
    summary: dict[str, Any]
    ran: int  # questions run in this call
    skipped: int  # questions already recorded by an earlier call


def failed_trace(question: Question, method: str, error: str, seconds: float = 0.0) -> Trace:
    trace = Trace.from_question(question, method, status="failed", error=error)
    trace.cost.seconds = seconds
    return trace


class _Progress:
    """tqdm bar on stderr with running F1 and mean cost; a no-op when disabled."""

    def __init__(self, total: int, done: list[Trace], enabled: bool) -> None:
        # Recorded traces carry the scores the runner gave them when they were written.
        self.f1 = [t.metrics.get("f1", 0.0) for t in done]
        self.tokens = [trace_cost(t)["total_tokens"] for t in done]
        self.seconds = [t.cost.seconds for t in done]
        self.failed = sum(t.status == "failed" for t in done)
        self.bar = None
        if enabled:
            from tqdm import tqdm

            self.bar = tqdm(total=total, initial=len(done), file=sys.stderr, unit="q",
                            dynamic_ncols=True, desc="eval")
            self._postfix()

    def _postfix(self) -> None:
        if self.bar is None or not self.f1:
            return
        n = len(self.f1)
        self.bar.set_postfix(f1=f"{sum(self.f1) / n:.3f}", tok=f"{sum(self.tokens) / n:.0f}",
                             s=f"{sum(self.seconds) / n:.2f}", failed=self.failed, refresh=False)

    def update(self, trace: Trace, f1: float) -> None:
        self.f1.append(f1)
        self.tokens.append(trace_cost(trace)["total_tokens"])
        self.seconds.append(trace.cost.seconds)
        self.failed += trace.status == "failed"
        if self.bar is not None:
            self._postfix()
            self.bar.update(1)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


class _GroupWriter:
    """Appends finished traces off the event loop, one fsync per batch.

    fsync takes milliseconds; done on the loop once per trace it would stall every question
    in flight. Traces that finish while a write is under way go out together in the next
    write, so nothing waits longer than one fsync and a kill loses only unwritten traces,
    which the resume reruns.
    """

    def __init__(self, run: RunDir) -> None:
        self.run = run
        self.pending: list[Trace] = []
        self.task: asyncio.Task[None] | None = None

    def put(self, trace: Trace) -> None:
        self.pending.append(trace)
        if self.task is None or self.task.done():
            self.task = asyncio.create_task(self._drain())

    async def _drain(self) -> None:
        while self.pending:
            batch, self.pending = self.pending, []
            await asyncio.to_thread(self.run.append_many, batch)

    async def close(self) -> None:
        while self.task is not None and not self.task.done():
            await self.task
        if self.task is not None:
            self.task.result()  # a failed write (disk full) must not pass silently
        if self.pending:
            await self._drain()


async def _run_one(method: MethodFn, method_name: str, question: Question, ctx: Any,
                   timeout: float | None = None) -> Trace:
    t0 = time.perf_counter()
    try:
        async with asyncio.timeout(timeout):
            trace = await method(question, ctx)
    except asyncio.CancelledError:
        raise
    except TimeoutError:
        log.warning("question %s timed out after %g s", question.id, timeout)
        return failed_trace(question, method_name, f"timed out after {timeout:g} s",
                            time.perf_counter() - t0)
    except Exception as e:  # noqa: BLE001 - a broken question must not stop the run
        log.warning("question %s failed: %s: %s", question.id, type(e).__name__, e)
        log.debug("%s", traceback.format_exc())
        return failed_trace(question, method_name, f"{type(e).__name__}: {e}",
                            time.perf_counter() - t0)
    if not isinstance(trace, Trace):
        return failed_trace(question, method_name,
                            f"method returned {type(trace).__name__}, not a Trace",
                            time.perf_counter() - t0)
    if trace.id != question.id:
        # The resume bookkeeping is keyed by question id; a mismatch would rerun it forever.
        trace.notes.append(f"method returned id {trace.id!r}; set to {question.id!r}")
        trace.id = question.id
    if not trace.dataset:
        trace.dataset = question.dataset
    if not trace.golden_answers:
        trace.golden_answers = list(question.golden_answers)
    if not trace.cost.seconds:
        trace.cost.seconds = time.perf_counter() - t0
    return trace


def prepare_run(
    questions: Sequence[Question],
    out_dir: str | Path,
    method_name: str,
    *,
    identity: dict[str, Any] | None = None,
    info: dict[str, Any] | None = None,
    files: dict[str, str] | None = None,
    force: bool = False,
    retry_failed: bool = False,
) -> RunDir:
    """Open (create or resume) the run directory for this question set; check it is this run.

    Call it before building expensive components so a mismatch fails fast. ``files`` (name ->
    text, e.g. the resolved ``config.yaml``) are written once the directory is accepted.
    """
    ids = [q.id for q in questions]
    if len(set(ids)) != len(ids):
        dup = sorted({i for i in ids if ids.count(i) > 1})[:5]
        raise ValueError(f"question ids must be unique; repeated: {dup}")
    ident = {"method": method_name, **(identity or {}), "questions": ids_digest(ids),
             "n": len(ids)}
    run = open_run_dir(out_dir, ident, info, force=force, retry_failed=retry_failed)
    for name, text in (files or {}).items():
        run.write_text(name, text)
    return run


async def evaluate(
    questions: Sequence[Question],
    method: MethodFn,
    ctx: Any,
    out: str | Path | RunDir,
    *,
    method_name: str | None = None,
    concurrency: int = 8,
    identity: dict[str, Any] | None = None,
    info: dict[str, Any] | None = None,
    force: bool = False,
    retry_failed: bool = False,
    progress: bool = False,
    scorer: Scorer | None = None,
    question_timeout: float | None = None,
) -> EvalResult:
    """Run ``method`` on every question not yet recorded in ``out``; write the outputs.

    ``out`` is a run directory path (opened with ``prepare_run`` using ``identity``, ``info``,
    ``force`` and ``retry_failed``) or an already prepared ``RunDir``. A question still running
    after ``question_timeout`` seconds is cancelled and recorded as failed. On completion
    ``metrics.json`` and ``report.md`` are rewritten from all recorded traces of this set.
    """
    if concurrency < 1:
        raise ValueError(f"concurrency must be >= 1, got {concurrency}")
    name = method_name or getattr(method, "__name__", "method")
    ids = [q.id for q in questions]
    run = out if isinstance(out, RunDir) else prepare_run(
        questions, out, name, identity=identity, info=info, force=force,
        retry_failed=retry_failed)
    scorer = scorer or score

    wanted = set(ids)
    stray = [i for i in run.done if i not in wanted]
    if stray:
        log.warning("%s holds %d traces for questions outside this set; ignoring them",
                    run.path, len(stray))
    pending = [q for q in questions if q.id not in run.done]
    skipped = len(questions) - len(pending)
    if skipped:
        log.info("resuming %s: %d done, %d to run", run.path, skipped, len(pending))

    bar = _Progress(len(questions), [run.done[i] for i in ids if i in run.done], progress)
    writer = _GroupWriter(run)
    queue: asyncio.Queue[Question] = asyncio.Queue()
    for q in pending:
        queue.put_nowait(q)

    async def worker() -> None:
        while True:
            try:
                q = queue.get_nowait()
            except asyncio.QueueEmpty:
                return
            trace = await _run_one(method, name, q, ctx, question_timeout)
            scores = score_trace(trace, scorer)
            trace.metrics.update(scores)
            writer.put(trace)
            bar.update(trace, scores["f1"])

    try:
        workers = [asyncio.create_task(worker()) for _ in range(min(concurrency, len(pending)))]
        try:
            await asyncio.gather(*workers)
        except BaseException:
            for w in workers:
                w.cancel()
            await asyncio.gather(*workers, return_exceptions=True)
            raise
        finally:
            # Finished traces are written even when the run is interrupted (Ctrl-C).
            await writer.close()
    finally:
        bar.close()

    traces = [run.done[i] for i in ids]
    summary = summarize(traces, scorer)
    run.write_json(METRICS, summary)
    run.write_text(REPORT, run_markdown(run.manifest, summary))
    return EvalResult(run.path, summary, ran=len(pending), skipped=skipped)
