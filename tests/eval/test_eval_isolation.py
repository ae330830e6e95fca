"""``marag eval`` on real batched decoding (tiny model): a question whose prompt holds a token
id the model has no embedding for (a tokenizer with a token added after the model was built,
a real misconfiguration) fails alone, recorded as a failed trace, and the questions decoded
beside it answer exactly as they do alone. Before row isolation that id reached the shared
batch and its embedding lookup failed every question in it."""

from __future__ import annotations

from types import SimpleNamespace

from tiny_method import tiny_rag

from marag.eval import evaluate
from marag.llm.hf_local import HFBackend
from marag.types import Question, Trace, read_jsonl

UNKNOWN = "<token-the-model-lacks>"


async def test_a_question_with_a_token_the_model_lacks_fails_alone(tmp_path, nq_questions):
    from marag.llm.tiny import build_tiny_model

    model, tok = build_tiny_model(seed=0)
    tok.add_tokens([UNKNOWN])
    assert tok.convert_tokens_to_ids(UNKNOWN) >= model.get_input_embeddings().num_embeddings
    good = nq_questions[:4]
    bad = Question(id="bad", question=f"what is {UNKNOWN}?", golden_answers=["x"],
                   dataset="nq_open")
    alone_ctx = SimpleNamespace(llm=HFBackend("tiny", model=model, tokenizer=tok),
                                retriever=None)
    await evaluate(good, tiny_rag, alone_ctx, tmp_path / "alone", concurrency=1)
    alone = {t.id: t.answer for t in read_jsonl(tmp_path / "alone" / "traces.jsonl", Trace)}
    backend = HFBackend("tiny", model=model, tokenizer=tok, batch_wait_ms=50)
    ctx = SimpleNamespace(llm=backend, retriever=None)
    res = await evaluate([*good[:2], bad, *good[2:]], tiny_rag, ctx, tmp_path / "run",
                         concurrency=5)
    traces = {t.id: t for t in read_jsonl(tmp_path / "run" / "traces.jsonl", Trace)}
    assert traces["bad"].status == "failed"
    assert traces["bad"].error.startswith("PromptError:")
    assert "vocabulary" in traces["bad"].error
    assert {i: t.answer for i, t in traces.items() if i != "bad"} == alone
    assert all(traces[i].status == "ok" for i in alone)
    assert res.summary["failed"] == 1
