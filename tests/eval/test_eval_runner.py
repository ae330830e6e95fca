"""evaluate(): concurrent runs over real questions and real BM25 retrieval, resume, failures."""

from __future__ import annotations

import asyncio
import json

import pytest
from tiny_method import first_title_answer, tiny_rag

from marag.eval import evaluate
from marag.llm.scripted import ScriptedLLM
from marag.types import Question, Trace, read_jsonl


async def test_run_writes_traces_metrics_and_report(tmp_path, nq_questions, ctx_factory):
    ctx = ctx_factory(ScriptedLLM({"AG": first_title_answer}))
    res = await evaluate(nq_questions, tiny_rag, ctx, tmp_path / "run", concurrency=4,
                         identity={"dataset": "nq_open"}, info={"command": ["test"]})
    assert (res.ran, res.skipped) == (12, 0)
    traces = read_jsonl(tmp_path / "run" / "traces.jsonl", Trace)
    assert sorted(t.id for t in traces) == sorted(q.id for q in nq_questions)
    assert all(t.metrics.keys() >= {"em", "f1", "acc"} for t in traces)
    assert all(t.steps[0].role == "R" and len(t.steps[0].doc_ids) == 3 for t in traces)
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert metrics == res.summary
    assert metrics["n"] == 12 and metrics["failed"] == 0
    assert metrics["workflows"] == {"R,AG": 12}
    assert metrics["roles"]["AG"] == {"valid": 12, "total": 12, "rate": 1.0}
    # The first retrieved title answers some real NQ questions (e.g. the Nobel one), not all.
    assert 0 < metrics["f1"] < 1
    report = (tmp_path / "run" / "report.md").read_text()
    assert "# tiny_rag on nq_open" in report and "| **all** | 12 | 0 |" in report
    manifest = json.loads((tmp_path / "run" / "run.json").read_text())
    assert manifest["identity"]["n"] == 12 and manifest["command"] == ["test"]


async def test_resume_runs_only_missing_questions(tmp_path, nq_questions, ctx_factory):
    llm = ScriptedLLM({"AG": first_title_answer})
    ctx = ctx_factory(llm)
    out = tmp_path / "run"
    await evaluate(nq_questions, tiny_rag, ctx, out, concurrency=3)
    path = out / "traces.jsonl"
    lines = path.read_text().splitlines(keepends=True)
    # As if the run died after 7 traces, in the middle of writing the 8th.
    path.write_text("".join(lines[:7]) + lines[7][:50])
    before = len(llm.calls)
    res = await evaluate(nq_questions, tiny_rag, ctx, out, concurrency=3)
    assert (res.ran, res.skipped) == (5, 7)
    assert len(llm.calls) - before == 5
    ids = [t.id for t in read_jsonl(path, Trace)]
    assert sorted(ids) == sorted(q.id for q in nq_questions)  # each exactly once
    again = await evaluate(nq_questions, tiny_rag, ctx, out, concurrency=3)
    assert (again.ran, again.skipped) == (0, 12)


async def test_failures_are_recorded_and_counted(tmp_path, nq_questions, ctx_factory):
    # Three replies for six questions: the other three calls raise LLMError, as a dead
    # endpoint would after its retries.
    ctx = ctx_factory(ScriptedLLM({"AG": ["<answer>x</answer>"] * 3}))
    res = await evaluate(nq_questions[:6], tiny_rag, ctx, tmp_path / "run", concurrency=1)
    traces = read_jsonl(tmp_path / "run" / "traces.jsonl", Trace)
    failed = [t for t in traces if t.status == "failed"]
    assert len(traces) == 6 and len(failed) == 3
    assert all(t.error.startswith("LLMError: scripted rule") and t.answer is None for t in failed)
    assert all(t.golden_answers and t.dataset == "nq_open" for t in failed)
    assert res.summary["failed"] == 3 and res.summary["ok"]["n"] == 3
    assert res.summary["f1"] == 0.0


async def test_concurrency_is_bounded_and_traces_land_as_they_finish(tmp_path, nq_questions):
    in_flight = peak = 0
    delays = {q.id: 0.05 * (len(nq_questions) - i) for i, q in enumerate(nq_questions)}

    async def slow(question, ctx):
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        await asyncio.sleep(delays[question.id])
        in_flight -= 1
        return Trace(id=question.id, question=question.question, method="slow", answer="")

    await evaluate(nq_questions, slow, None, tmp_path / "run", concurrency=4)
    assert peak == 4
    ids = [t.id for t in read_jsonl(tmp_path / "run" / "traces.jsonl", Trace)]
    # q0..q3 start together and q3 sleeps least, so it is recorded first.
    assert ids[0] == nq_questions[3].id and ids != [q.id for q in nq_questions]


async def test_bad_method_results_become_failed_items(tmp_path, nq_questions):
    async def broken(question, ctx):
        if question.id.endswith("1"):
            return {"answer": "not a trace"}
        return Trace(id="wrong-id", question=question.question, method="broken", answer="x")

    res = await evaluate(nq_questions[:3], broken, None, tmp_path / "run")
    traces = {t.id: t for t in read_jsonl(tmp_path / "run" / "traces.jsonl", Trace)}
    assert set(traces) == {q.id for q in nq_questions[:3]}
    assert traces[nq_questions[1].id].error == "method returned dict, not a Trace"
    assert "returned id 'wrong-id'" in traces[nq_questions[0].id].notes[0]
    assert res.summary["failed"] == 1


async def test_duplicate_question_ids_are_refused(tmp_path, nq_questions):
    with pytest.raises(ValueError, match="unique"):
        await evaluate(nq_questions[:2] * 2, tiny_rag, None, tmp_path / "run")


async def test_a_question_past_the_timeout_is_recorded_failed(tmp_path, nq_questions, ctx_factory):
    ctx = ctx_factory(ScriptedLLM({"AG": first_title_answer}))
    slow_id = nq_questions[2].id

    async def method(question, context):
        if question.id == slow_id:
            await asyncio.sleep(3600)  # a workflow that never finishes
        return await tiny_rag(question, context)

    res = await evaluate(nq_questions[:4], method, ctx, tmp_path / "run", concurrency=4,
                         method_name="tiny_rag", question_timeout=0.5)
    traces = {t.id: t for t in read_jsonl(tmp_path / "run" / "traces.jsonl", Trace)}
    assert len(traces) == 4 and res.summary["failed"] == 1
    assert traces[slow_id].status == "failed"
    assert traces[slow_id].error == "timed out after 0.5 s"
    assert all(t.status == "ok" for i, t in traces.items() if i != slow_id)


async def test_a_question_whose_prompt_cannot_be_decoded_fails_alone(tmp_path, nq_questions):
    # real batched decoding (tiny model, 512 positions): one question far past the context
    # shares the decoder with four good ones, which answer as they do alone
    from types import SimpleNamespace

    from marag.llm.hf_local import HFBackend
    from marag.llm.tiny import build_tiny_model

    model, tok = build_tiny_model(seed=0)
    good = nq_questions[:4]
    huge = Question(id="huge", question="why " * 2000, golden_answers=["x"], dataset="nq_open")
    alone_ctx = SimpleNamespace(llm=HFBackend("tiny", model=model, tokenizer=tok), retriever=None)
    await evaluate(good, tiny_rag, alone_ctx, tmp_path / "alone", concurrency=1)
    alone = {t.id: t.answer for t in read_jsonl(tmp_path / "alone" / "traces.jsonl", Trace)}
    ctx = SimpleNamespace(llm=HFBackend("tiny", model=model, tokenizer=tok, batch_wait_ms=20),
                          retriever=None)
    res = await evaluate([*good[:2], huge, *good[2:]], tiny_rag, ctx, tmp_path / "run",
                         concurrency=5)
    traces = {t.id: t for t in read_jsonl(tmp_path / "run" / "traces.jsonl", Trace)}
    assert traces["huge"].status == "failed"
    assert traces["huge"].error.startswith("PromptError:") and "tokens" in traces["huge"].error
    assert {i: t.answer for i, t in traces.items() if i != "huge"} == alone
    assert all(traces[i].status != "failed" for i in alone)
    assert res.summary["failed"] == 1
