"""Every training preset (configs/*-train.yaml) loads through the checked config path, trains
roles its method runs, and makes one iteration on the tiny random model."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest
import torch

from marag.commands.options import load_run_config
from marag.config import ConfigError, load_config
from marag.llm.hf_local import HFBackend
from marag.llm.tiny import build_tiny_model
from marag.retrieval.base import Retriever
from marag.train.trainer import METHOD_ROLES, Trainer, trained_roles
from marag.types import Hits, Passage, Question
from marag.workflows import Context

PRESETS = sorted((Path(__file__).resolve().parents[2] / "configs").glob("*-train.yaml"))
QUESTIONS = [Question("q1", "What is the capital of France?", ["Paris"]),
             Question("q2", "Who wrote Hamlet?", ["William Shakespeare"])]
# a small budget for the tiny model; everything else is the preset's own
TINY = ["train.iterations=1", "train.questions_per_iteration=1", "train.samples_per_question=2",
        "train.concurrency=2", "train.micro_batch_size=4", "train.lora.r=4",
        "train.lora.target_modules=[q_proj,v_proj]", "method.max_tokens.default=8",
        "method.max_tokens.search-r1=8", "method.search_turns=1",
        "method.max_rounds=2", "method.max_turns=1", "method.candidates=3"]


class Docs(Retriever):
    name = "docs"

    def search_batch(self, queries: list[str], k: int) -> list[Hits]:
        docs = [Passage(f"d{i}", "Paris", f"Paris is the capital of France ({i}).")
                for i in range(k)]
        return [Hits(q, docs, [1.0] * k) for q in queries]


def test_every_method_that_trains_has_a_preset():
    methods = {load_config(p).method.name for p in PRESETS}
    assert methods >= {"jade", "mao-arag", "mmoa-rag", "m-ask"}
    names = {p.stem for p in PRESETS}
    assert {"jade-no-ds-train", "m-ask-final-reward-train"} <= names  # the ablations


@pytest.mark.parametrize("path", PRESETS, ids=[p.stem for p in PRESETS])
def test_preset_trains_roles_its_method_runs(path):
    cfg = load_run_config(argparse.Namespace(config=str(path)), [])
    roles = trained_roles(cfg)
    assert roles and set(roles) <= set(METHOD_ROLES[cfg.method.name])
    assert cfg.train.datasets and cfg.train.holdout_per_dataset > 0


def test_a_role_the_method_never_runs_is_refused():
    cfg = load_config(None, ["method.name=mmoa-rag", "train.roles=[planner]"])
    with pytest.raises(ConfigError, match="never run in method mmoa-rag"):
        trained_roles(cfg)


def _tiny_llms(cfg) -> dict:
    """One tiny backend per model the config loads: entries that share a model share it."""
    llms, shared = {}, None
    for name, entry in cfg.llms.items():
        if entry.share and shared is not None:
            llms[name] = shared
            continue
        model, tok = build_tiny_model(seed=0)
        llms[name] = HFBackend("tiny", model=model, tokenizer=tok, batch_wait_ms=0)
        if entry.share:
            shared = llms[name]
    return llms


LOCAL = [p for p in PRESETS if load_config(p).train.rollout == "local"]


@pytest.mark.parametrize("path", LOCAL, ids=[p.stem for p in LOCAL])
def test_preset_makes_one_iteration_on_the_tiny_model(path, tmp_path):
    cfg = load_run_config(argparse.Namespace(config=str(path)), TINY)
    ctx = Context(llms=_tiny_llms(cfg), config=cfg, retriever=Docs())
    torch.manual_seed(0)
    tr = Trainer(cfg, tmp_path, questions=QUESTIONS, context=ctx, tensorboard=False)
    [row] = tr.run()
    assert row["traces"] == 2 and row["transitions"] > 0
    from marag.types import Trace, read_jsonl

    traces = read_jsonl(tmp_path / "rollouts" / "iter-000001.jsonl", Trace)
    ran = {s.role for t in traces for s in t.steps if s.is_llm}
    assert ran & set(tr.roles)  # some trained role ran
    if cfg.method.skip_codes:
        assert not ran & set(cfg.method.skip_codes)


@pytest.mark.parametrize("path", LOCAL, ids=[p.stem for p in LOCAL])
def test_preset_with_entropy_and_kl_loss_stays_finite(path, tmp_path):
    """Each preset with an entropy bonus and the KL as a loss term (the options that made
    restricted decoding's gradients NaN): finite losses and gradient norms, no skipped step."""
    import math

    cfg = load_run_config(argparse.Namespace(config=str(path)), [
        *TINY, "train.entropy_coef=0.01", "train.kl_mode=loss", "train.kl_coef=0.05"])
    ctx = Context(llms=_tiny_llms(cfg), config=cfg, retriever=Docs())
    torch.manual_seed(0)
    [row] = Trainer(cfg, tmp_path, questions=QUESTIONS, context=ctx, tensorboard=False).run()
    for key in ("pg_loss", "grad_norm", "entropy", "kl_k3", "kl"):
        assert math.isfinite(row[key]), (key, row[key])
    assert row["skipped_steps"] == 0 and row["optimizer_steps"] >= 1
