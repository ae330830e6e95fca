"""train.rollout: server: the trained roles decode on an OpenAI-compatible server (marag's
own serve-llm over the tiny model, in a thread) that reloads the LoRA adapter after every
update, while the trainer keeps the policy locally for logprobs and updates."""

from __future__ import annotations

import asyncio
import gzip
import json
from pathlib import Path

import pytest
import torch

from marag.config import load_config
from marag.llm.base import SamplingParams
from marag.llm.hf_local import HFBackend
from marag.llm.openai_http import OpenAIBackend
from marag.llm.server import create_app
from marag.llm.tiny import build_tiny_model
from marag.train.trainer import Trainer, TrainError
from marag.types import Question
from marag.workflows import Context

QUESTIONS = [Question("q1", "What is the capital of France?", ["Paris"]),
             Question("q2", "Who wrote Hamlet?", ["William Shakespeare"]),
             Question("q3", "Where is Mount Everest?", ["Nepal"])]

LORA = "policy-lora"
CONFIGS = Path(__file__).resolve().parents[2] / "configs"
HI = [{"role": "user", "content": "What is the capital of France?"}]


def _server_app(template: str | None = None):
    model, tok = build_tiny_model(seed=0)  # the same weights as the trainer's base model
    if template is not None:
        tok.chat_template = template
    return create_app(HFBackend("tiny", model=model, tokenizer=tok, batch_wait_ms=0),
                      ["tiny"], allow_lora_updates=True)


def make(tmp_path, url: str, *overrides: str):
    cfg = load_config(None, [
        # exact fp32 and token-level GAE: these tests compare runs, not estimators
        "train.dtype=float32", "train.estimator=gae", "train.lam=0.95",
        "method.name=llm-only", "train.iterations=2", "train.questions_per_iteration=2",
        "train.samples_per_question=2", "train.concurrency=2", "train.minibatch_size=4",
        "train.micro_batch_size=2", "train.lr=2e-2", "train.critic_lr=1e-3", "train.lora.r=4",
        "train.lora.target_modules=[q_proj,v_proj]", "train.seed=3", "method.max_tokens.default=12",
        "llms.rollout.backend=openai", f"llms.rollout.base_url={url}",
        f"llms.rollout.model={LORA}", "llms.rollout.token_ids=true", "llms.policy.backend=hf",
        "roles.default=rollout", "train.rollout=server", "train.policy_llm=policy",
        *overrides])
    model, tok = build_tiny_model(seed=0)
    llms = {"rollout": OpenAIBackend(url, LORA, token_ids=cfg.llms["rollout"].token_ids,
                                     retries=0),
            "policy": HFBackend("tiny", model=model, tokenizer=tok, batch_wait_ms=0)}
    ctx = Context(llms=llms, config=cfg)  # llm-only: no retrieval
    torch.manual_seed(0)
    return Trainer(cfg, tmp_path, questions=QUESTIONS, context=ctx, tensorboard=False)


async def _greedy(backend, messages) -> list[float]:
    [c] = await backend.generate([messages], SamplingParams(max_tokens=8, logprobs=True))
    if hasattr(backend, "aclose"):
        await backend.aclose()
    return c.logprobs


def test_two_iterations_with_the_adapter_reloaded_into_the_server(tmp_path, serve_app):
    app = _server_app()
    with serve_app(app) as base:
        url = f"{base}/v1"
        tr = make(tmp_path, url)
        adapters = app.state.adapters
        assert adapters.get(LORA) is not None  # the starting adapter, before any rollout
        rows = tr.run()
        assert [r["iteration"] for r in rows] == [1, 2]
        assert rows[1]["transitions"] == 4
        # every rollout came from the weights being trained: iteration 2 sampled from the
        # adapter of update 1, reloaded in place (server backend's version 1 -> 2)
        for r in rows:
            assert r["logprob_gap"] < 1e-4, r["logprob_gap"]
        assert adapters.get(LORA).weights_version == 2
        assert adapters.paths[LORA].endswith("adapter-iter-000002")
        traces = tr.rollout(2)
        steps = [s for t in traces for s in t.steps]
        # the server says which model answered and which prompt ids it decoded from
        assert all(s.model == LORA and s.prompt_token_ids == tr.backend.encode(s.messages)
                   for s in steps)
        # the server now answers with the trained adapter: as the local policy does, and
        # no longer as the base model does
        client = OpenAIBackend(url, LORA)
        served_lp = asyncio.run(_greedy(client, HI))
        local_lp = asyncio.run(_greedy(HFBackend("x", model=tr.backend.module,
                                                 tokenizer=tr.tokenizer), HI))
        base_lp = asyncio.run(_greedy(OpenAIBackend(url, "tiny"), HI))
        assert served_lp == pytest.approx(local_lp, abs=1e-4)
        assert max(abs(a - b) for a, b in zip(served_lp, base_lp)) > 1e-3


def test_a_server_with_another_chat_template_is_refused(tmp_path, serve_app):
    other = "{% for m in messages %}{{ m['content'] }}\n{% endfor %}assistant:"
    with serve_app(_server_app(other)) as base:
        url = f"{base}/v1"
        tr = make(tmp_path, url, "train.iterations=1")
        with pytest.raises(TrainError, match="prompt token ids differ"):
            tr.run()


def test_a_server_that_keeps_old_weights_is_caught(tmp_path, serve_app):
    with serve_app(_server_app()) as base:
        url = f"{base}/v1"
        tr = make(tmp_path, url, "train.max_logprob_gap=1e-3")
        tr.sync.push = lambda version: None  # the server never gets the update
        tr.iteration(0)
        with pytest.raises(TrainError, match="did not come from the weights being trained"):
            tr.iteration(1)


def test_server_rollout_setups_that_cannot_work_are_refused(tmp_path):
    url = "http://127.0.0.1:9/v1"  # nothing listens there
    with pytest.raises(TrainError, match="full fine-tuning"):
        make(tmp_path / "a", url, "train.lora.enabled=false")
    with pytest.raises(TrainError, match="token_ids: true"):
        make(tmp_path / "b", url, "llms.rollout.token_ids=false")
    with pytest.raises(TrainError, match="train.policy_llm"):
        make(tmp_path / "c", url, "train.policy_llm=nope")
    with pytest.raises(TrainError, match="sync: .*load_lora_adapter.*Connect"):
        make(tmp_path / "d", url)  # a good setup, but no server: said before any rollout


def test_sharded_training_is_refused_with_the_reason(monkeypatch):
    from types import SimpleNamespace

    from marag.train.trainer import _sharded, refuse_sharding

    def acc(kind, stage=None, fsdp=None):
        plugin = SimpleNamespace(zero_stage=stage) if stage else None
        fsdp_plugin = SimpleNamespace(fsdp_version=fsdp) if fsdp else None
        return SimpleNamespace(state=SimpleNamespace(distributed_type=kind,
                                                     deepspeed_plugin=plugin,
                                                     fsdp_plugin=fsdp_plugin))

    assert _sharded(acc("DistributedType.MULTI_GPU")) == ""
    assert _sharded(acc("DistributedType.FSDP", fsdp=2)) == "FSDP2"
    assert _sharded(acc("DistributedType.FSDP", fsdp=1)) == "FSDP1"
    assert _sharded(acc("DistributedType.DEEPSPEED", 3)) == "DeepSpeed ZeRO-3"
    refuse_sharding("", "local")
    refuse_sharding("FSDP2", "server")  # supported: tests/train/test_distributed.py
    refuse_sharding("", "local", share_prompts=True)
    with pytest.raises(TrainError, match="share_prompts: false"):
        refuse_sharding("FSDP2", "server", share_prompts=True)
    with pytest.raises(TrainError, match="rollouts decode with that very module"):
        refuse_sharding("FSDP2", "local")
    with pytest.raises(TrainError, match="fsdp_version: 2"):
        refuse_sharding("FSDP1", "server")
    with pytest.raises(TrainError, match="does not support"):
        refuse_sharding("DeepSpeed ZeRO-2", "server")
    # launched for FSDP on a CPU: accelerate quietly runs DDP instead, the trainer says so
    monkeypatch.setenv("ACCELERATE_USE_FSDP", "true")
    with pytest.raises(TrainError, match="FSDP on GPUs only"):
        _sharded(acc("DistributedType.MULTI_CPU"))
    monkeypatch.delenv("ACCELERATE_USE_FSDP")
    cfg = load_config(None, ["method.name=llm-only"])
    with pytest.raises(TrainError, match="FSDP2"):
        Trainer(cfg, "unused", questions=QUESTIONS,
                accelerator=acc("DistributedType.FSDP", fsdp=2))


def test_one_server_serves_the_trained_adapter_and_the_frozen_readers_model(
        tmp_path, serve_app):
    """configs/rrr-server-train.yaml's layout: the trained rewriter decodes as the adapter the
    trainer reloads, the frozen reader as another model name on the same server (here the
    base model's; a second adapter on vLLM); only the rewriter's steps are trained."""
    from test_trainer import Docs

    app = _server_app()
    with serve_app(app) as base:
        url = f"{base}/v1"
        cfg = load_config(CONFIGS / "rrr-server-train.yaml", [
            "train.dtype=float32", "train.iterations=1", "train.questions_per_iteration=2",
            "train.samples_per_question=2", "train.concurrency=2", "train.minibatch_size=4",
            "train.micro_batch_size=2", "train.lora.r=4", "train.lora.target_modules=[q_proj,v_proj]",
            "method.max_tokens.default=12", "method.candidates=2", "method.top_k=2",
            f"llms.rollout.base_url={url}", f"llms.rollout.model={LORA}",
            f"llms.reader.base_url={url}", "llms.reader.model=tiny"])
        model, tok = build_tiny_model(seed=0)
        llms = {"rollout": OpenAIBackend(url, LORA, token_ids=True, retries=0),
                "reader": OpenAIBackend(url, "tiny", retries=0),
                "policy": HFBackend("tiny", model=model, tokenizer=tok, batch_wait_ms=0)}
        torch.manual_seed(0)
        tr = Trainer(cfg, tmp_path, questions=QUESTIONS,
                     context=Context(llms=llms, config=cfg, retriever=Docs()),
                     tensorboard=False)
        [row] = tr.run()
    assert row["transitions"] == 4 and row["logprob_gap"] < 1e-4  # 4 rewrites trained
    [path] = (tmp_path / "rollouts").iterdir()
    with (gzip.open if path.suffix == ".gz" else open)(path, "rt") as f:
        steps = [s for line in f for s in json.loads(line)["steps"] if s.get("model")]
    assert {s["model"] for s in steps if s["role"] == "mmoa.QR"} == {LORA}
    assert {s["model"] for s in steps if s["role"] == "AG"} == {"tiny"}
