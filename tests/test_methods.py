"""The method registry walked whole: every registered method answers on the scripted LLM,
takes one training step on the tiny random model (or, inference-only, is refused for
training with its reason), and has its row in docs/fidelity.md."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch
from tests.workflows.test_shipped_configs import REPLIES

from marag.config import load_config
from marag.llm.hf_local import HFBackend
from marag.llm.scripted import ScriptedLLM
from marag.llm.tiny import build_tiny_model
from marag.methods import METHOD_NAMES, REGISTRY, MethodSpec, check_trainable, get_method
from marag.retrieval.base import Retriever
from marag.roles import ROLES
from marag.train.rewards import PAPER_REWARDS
from marag.train.trainer import Trainer
from marag.types import Hits, Passage, Question
from marag.workflows import METHODS, RETRIEVES, Context, run_method

ROOT = Path(__file__).resolve().parents[1]
Q = Question("q1", "Who wrote Hamlet?", ["William Shakespeare"])


class Docs(Retriever):
    name = "docs"

    def search_batch(self, queries: list[str], k: int) -> list[Hits]:
        docs = [Passage(f"d{i}", "Hamlet", f"Hamlet was written by William Shakespeare ({i}).")
                for i in range(k)]
        return [Hits(q, docs, [1.0] * k) for q in queries]


def test_registry_is_consistent():
    assert list(METHODS) == list(METHOD_NAMES) == [m.name for m in REGISTRY]
    for m in REGISTRY:
        assert set(m.trained) <= set(m.roles) <= set(ROLES), m.name
        assert m.reward in PAPER_REWARDS, m.name
        assert RETRIEVES[m.name] is m.retrieves
    with pytest.raises(ValueError, match="unknown method 'jadee'"):
        get_method("jadee")


def test_an_unknown_method_in_a_config_names_the_close_one():
    from marag.config import ConfigError

    with pytest.raises(ConfigError, match="did you mean 'search-r1'"):
        load_config(None, ["method.name=search-r2"])


@pytest.mark.parametrize("name", METHOD_NAMES)
async def test_every_method_answers_on_the_scripted_llm(name):
    cfg = load_config(None, [f"method.name={name}", "llms.default.backend=scripted"])
    llm = ScriptedLLM(dict(REPLIES))
    ctx = Context(llms={"default": llm}, config=cfg,
                  retriever=Docs() if get_method(name).retrieves else None)
    t = await run_method(name, Q, ctx)
    assert t.status == "ok", t.error
    assert t.answer and {s.role for s in t.steps if s.is_llm} <= set(get_method(name).roles)


TRAINABLE = [m.name for m in REGISTRY if not m.inference_only]


def test_inference_only_methods_train_nothing_and_are_refused():
    only = [m for m in REGISTRY if m.inference_only]
    assert [m.name for m in only] == ["self-rag"]
    for m in only:
        assert m.trained == ()
        with pytest.raises(ValueError, match=f"method '{m.name}' is inference-only: Self-RAG"):
            check_trainable(m.name)
    assert check_trainable("deepnote").trained == get_method("deepnote").roles
    # the record itself refuses a method that is both, or neither
    with pytest.raises(ValueError, match="trains no role"):
        MethodSpec("x", "", "static:vanilla", ("AG",), ("AG",), "final", inference_only="why")
    with pytest.raises(ValueError, match="trains no role"):
        MethodSpec("x", "", "static:vanilla", ("AG",), (), "final")


@pytest.mark.parametrize("name", TRAINABLE)
def test_every_method_takes_a_training_step_on_the_tiny_model(name, tmp_path):
    cfg = load_config(None, [
        f"method.name={name}", "method.max_tokens.default=6", "method.max_rounds=2",
        "method.max_turns=1", "method.candidates=3", "method.search_turns=1",
        "method.ircot_top_k=2", "method.ircot_steps=1",  # ircot's prompt in the 511-token window
        "method.deepnote_top_k=2",  # deepnote's, too
        "train.iterations=1", "train.questions_per_iteration=1",
        "train.samples_per_question=2", "train.concurrency=2", "train.micro_batch_size=2",
        "train.lora.r=4", "train.lora.target_modules=[q_proj,v_proj]",
        "train.estimator=grpo", "train.kl_mode=loss", "train.lr=1e-2", *_frozen_apart(name)])
    llms = {}
    for entry in cfg.llms:  # frozen roles run on a tiny model of their own (mao-arag)
        model, tok = build_tiny_model(seed=0)
        llms[entry] = HFBackend("tiny", model=model, tokenizer=tok, batch_wait_ms=0)
    ctx = Context(llms=llms, config=cfg, retriever=Docs())
    torch.manual_seed(0)
    tr = Trainer(cfg, tmp_path, questions=[Q], context=ctx, tensorboard=False)
    [row] = tr.run()
    assert row["traces"] == 2 and row["transitions"] >= 1 and row["trained_tokens"] > 0
    assert row["skipped_steps"] == 0


def _frozen_apart(name: str) -> list[str]:
    """Overrides that put a method's frozen roles on an llms entry apart from the policy's
    (the trainer refuses frozen roles on the model it trains)."""
    m = get_method(name)
    frozen = [r for r in m.roles if r not in m.trained]
    if not frozen:
        return []
    return ["llms.default.backend=hf", "llms.frozen.backend=hf", "llms.frozen.share=false",
            "roles.default=frozen",
            *[f"roles.{r}=default" for r in m.trained]]


def test_every_method_has_its_row_in_fidelity():
    text = (ROOT / "docs" / "fidelity.md").read_text()
    for name in METHOD_NAMES:
        assert re.search(rf"^\| `{re.escape(name)}` \|", text, re.MULTILINE), name
