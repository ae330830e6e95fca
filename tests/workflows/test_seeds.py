"""Per-question sampling seeds: samples of one question differ, a rerun repeats them."""

import asyncio

import pytest

from marag.config import load_config
from marag.llm.hf_local import HFBackend
from marag.llm.tiny import build_tiny_model
from marag.types import Question
from marag.workflows import Context, run_method
from marag.workflows.engine import derive_seed


@pytest.fixture(scope="module")
def backend():
    import torch

    torch.set_num_threads(1)
    model, tok = build_tiny_model(seed=0)
    return HFBackend("tiny", model=model, tokenizer=tok, batch_wait_ms=0)


def _ctx(backend, seed=7):
    cfg = load_config(None, ["sampling.temperature=1.0", f"sampling.seed={seed}"])
    return Context(llms={"default": backend}, config=cfg, logprobs=True)


def _answers(backend, seed, samples, qid="q1"):
    q = Question(id=qid, question="Who wrote the play Hamlet?", golden_answers=["Shakespeare"])

    async def go():
        ctx = _ctx(backend, seed)
        return await asyncio.gather(*(run_method("llm-only", q, ctx, s) for s in samples))

    return asyncio.run(go())


def test_samples_differ_and_rerun_repeats(backend):
    first = _answers(backend, 7, range(4))
    again = _answers(backend, 7, range(4))
    ids = [tuple(t.steps[0].token_ids) for t in first]
    assert len(set(ids)) == 4  # four samples of one question, four different completions
    assert ids == [tuple(t.steps[0].token_ids) for t in again]
    assert [t.sample for t in first] == [0, 1, 2, 3]
    other = _answers(backend, 8, range(4))
    assert ids != [tuple(t.steps[0].token_ids) for t in other]


def test_step_records_sampling_and_weights_version(backend):
    (t,) = _answers(backend, 7, [0])
    s = t.steps[0]
    assert s.sampling["temperature"] == 1.0 and s.sampling["top_p"] == 1.0
    assert s.sampling["seed"] == derive_seed(7, "q1", 0, 0, "AG", 0)
    assert s.weights_version == backend.weights_version
    assert s.token_ids and len(s.logprobs) == len(s.token_ids)


def test_derive_seed_is_stable_and_spread():
    assert derive_seed(1, "a", 0) == derive_seed(1, "a", 0)
    seeds = {derive_seed(1, "a", i) for i in range(1000)}
    assert len(seeds) == 1000 and all(0 <= s < 2**63 for s in seeds)
