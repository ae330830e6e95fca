"""Trainer mechanics on a tiny random Llama built in code (no real weights)."""

from __future__ import annotations

import json
import math

import pytest
import torch

from marag.config import load_config
from marag.llm.hf_local import HFBackend
from marag.llm.tiny import build_tiny_model
from marag.retrieval.base import Retriever
from marag.train.trainer import Trainer
from marag.types import Hits, Passage, Question
from marag.workflows import Context

QUESTIONS = [
    Question("q1", "What is the capital of France?", ["Paris"]),
    Question("q2", "Who wrote Hamlet?", ["William Shakespeare"]),
    Question("q3", "Where is Mount Everest?", ["Nepal"]),
    Question("q4", "Which tower is in Paris?", ["Eiffel Tower"]),
]


class Docs(Retriever):
    name = "docs"

    def search_batch(self, queries: list[str], k: int) -> list[Hits]:
        docs = [Passage("d0", "Paris", "Paris is the capital of France."),
                Passage("d1", "Hamlet", "Hamlet was written by William Shakespeare."),
                Passage("d2", "Everest", "Mount Everest is in Nepal.")][:k]
        return [Hits(q, docs, [1.0] * len(docs)) for q in queries]


def make(tmp_path, *overrides: str, method: str = "llm-only", questions=QUESTIONS):
    cfg = load_config(None, [
        f"method.name={method}", "method.top_k=2", "train.iterations=2",
        "train.questions_per_iteration=2", "train.samples_per_question=2",
        "train.concurrency=1", "train.minibatch_size=4", "train.micro_batch_size=2",
        "train.lr=1e-3", "train.critic_lr=1e-3", "train.lora.r=4",
        "train.lora.target_modules=[q_proj,v_proj]", "train.seed=3",
        # token-level GAE: the tiny model's equal rewards still give per-token advantages,
        # so these mechanics tests see the adapter move from the first update
        "train.estimator=gae", "train.lam=0.95", *overrides])
    model, tok = build_tiny_model(seed=0)
    backend = HFBackend("tiny", model=model, tokenizer=tok, batch_wait_ms=0,
                        max_batch_size=4)
    ctx = Context(llms={"default": backend}, config=cfg, retriever=Docs())
    torch.manual_seed(0)
    return Trainer(cfg, tmp_path, questions=questions, context=ctx, tensorboard=False)


def _snapshot(module):
    return {n: p.detach().clone() for n, p in module.named_parameters()}


def test_one_lora_update_changes_only_the_adapter_and_value_head(tmp_path):
    tr = make(tmp_path, "train.iterations=1")
    before = _snapshot(tr.policy)
    rows = tr.run()
    assert len(rows) == 1 and rows[0]["transitions"] == 4  # 2 questions x 2 samples, AG each
    after = dict(tr.policy.named_parameters())
    changed = {n for n, v in before.items() if not torch.equal(v, after[n])}
    assert changed, "the update changed nothing"
    assert all("lora_" in n or n.startswith("value_head") for n in changed), changed
    assert any("lora_" in n for n in changed)
    assert (tmp_path / "checkpoints" / "iter-000001" / "policy" / "adapter_config.json").is_file()
    assert (tmp_path / "metrics.csv").read_text().startswith("iteration,")
    # the rollout backend now samples from the updated weights
    assert tr.backend.weights_version == 1


def test_full_fine_tuning_updates_the_backbone(tmp_path):
    tr = make(tmp_path, "train.iterations=1", "train.lora.enabled=false")
    emb = tr.policy.causal_lm().get_input_embeddings().weight.detach().clone()
    tr.run()
    assert not torch.equal(emb, tr.policy.causal_lm().get_input_embeddings().weight)
    assert tr.reference is not None  # a frozen copy gives the reference logprobs
    assert (tmp_path / "checkpoints" / "iter-000001" / "policy" / "config.json").is_file()


def test_samples_of_one_question_differ(tmp_path):
    tr = make(tmp_path)
    traces = tr.rollout(0)
    assert [t.sample for t in traces] == [0, 1, 0, 1]
    by_q = {}
    for t in traces:
        by_q.setdefault(t.id, []).append(tuple(t.steps[0].token_ids))
    assert all(a != b for a, b in by_q.values())
    again = make(tmp_path / "b").rollout(0)
    assert [tuple(t.steps[0].token_ids) for t in traces] == [
        tuple(t.steps[0].token_ids) for t in again]


def test_resume_reproduces_the_next_iteration_exactly(tmp_path):
    straight = make(tmp_path / "a").run()
    first = make(tmp_path / "b", "train.iterations=1").run()
    assert first[0] == straight[0] | {k: first[0][k] for k in first[0] if k.startswith("seconds")}
    resumed = make(tmp_path / "b")  # same command, picks up the checkpoint
    assert resumed.start == 1
    second = resumed.run()
    assert len(second) == 1
    for key in ("pg_loss", "vf_loss", "reward", "f1", "kl", "entropy", "clipfrac"):
        assert second[0][key] == straight[1][key], key
    rows = [r["iteration"] for r in resumed.logbook.rows()]
    assert rows == [1, 2]


def test_an_extended_run_resumes_on_the_new_cosine_schedule(tmp_path):
    # one iteration of a 1-iteration cosine run ends at the floor (10%); extended to 3, the
    # next iteration must use the 3-iteration schedule's rate, as a straight 3-iteration run
    cosine = ("train.lr_schedule=cosine", "train.warmup_iterations=0")
    straight = make(tmp_path / "a", "train.iterations=3", *cosine).run()
    make(tmp_path / "b", "train.iterations=1", *cosine).run()
    extended = make(tmp_path / "b", "train.iterations=3", *cosine)
    assert extended.start == 1
    rows = extended.run()
    assert [r["lr"] for r in rows] == pytest.approx([r["lr"] for r in straight[1:]])
    assert rows[0]["lr"] == pytest.approx(1e-3 * (0.1 + 0.45 * (1 + math.cos(math.pi / 3))))


@pytest.mark.parametrize("estimator", ["turn-gae", "gae", "per-step", "grpo"])
def test_jade_trains_every_role_it_ran(tmp_path, estimator):
    kl = ["train.kl_mode=loss"] if estimator == "grpo" else []
    tr = make(tmp_path, "train.iterations=1", f"train.estimator={estimator}", *kl,
              method="jade")
    traces = tr.rollout(0)
    from marag.train.experience import collect
    from marag.train.rewards import step_rewards

    rewards = [step_rewards(t, tr.cfg.rewards) for t in traces]
    trans = collect(traces, rewards, tr.roles)
    llm_steps = [s for t in traces for s in t.steps if s.is_llm]
    assert len(trans) == len(llm_steps) and {t.role for t in trans} >= {"planner", "AG"}
    row = tr.run()[0]
    assert row["transitions"] == len(trans)


def test_frozen_roles_never_reach_the_buffer(tmp_path):
    cfg = load_config(None, [
        "method.name=jade", "method.top_k=2", "train.iterations=1", "train.roles=[planner]",
        "train.questions_per_iteration=2", "train.samples_per_question=2",
        "train.concurrency=1", "train.lora.r=4", "train.lora.target_modules=[q_proj,v_proj]",
        "llms.policy.backend=hf", "llms.executor.backend=hf", "roles.planner=policy",
        "roles.default=executor"])
    backends = {}
    for name in ("policy", "executor"):
        model, tok = build_tiny_model(seed=0)
        backends[name] = HFBackend("tiny", model=model, tokenizer=tok, batch_wait_ms=0)
    frozen = _snapshot(backends["executor"].module)
    ctx = Context(llms=backends, config=cfg, retriever=Docs())
    tr = Trainer(cfg, tmp_path, questions=QUESTIONS, context=ctx, tensorboard=False)
    row = tr.run()[0]
    traces = _rollouts(tmp_path)
    planner_steps = sum(1 for t in traces for s in t.steps if s.role == "planner")
    assert row["transitions"] == planner_steps > 0
    assert any(s.role == "AG" for t in traces for s in t.steps)
    after = dict(backends["executor"].module.named_parameters())
    assert all(torch.equal(v, after[n]) for n, v in frozen.items())  # executors untouched


def _rollouts(out):
    from marag.types import Trace, read_jsonl

    return read_jsonl(out / "rollouts" / "iter-000001.jsonl", Trace)


def test_frozen_roles_on_the_policy_model_are_refused(tmp_path):
    from marag.train.trainer import TrainError

    with pytest.raises(TrainError, match="share: false"):
        make(tmp_path, method="mao-arag")  # planner trained, executors on the same model


def test_trained_roles_on_an_api_backend_are_refused(tmp_path):
    from marag.llm.scripted import ScriptedLLM
    from marag.train.trainer import TrainError

    cfg = load_config(None, ["method.name=llm-only", "llms.default.backend=scripted"])
    ctx = Context(llms={"default": ScriptedLLM({"AG": "<answer>x</answer>"})}, config=cfg)
    with pytest.raises(TrainError, match="needs the local 'hf' backend"):
        Trainer(cfg, tmp_path, questions=QUESTIONS, context=ctx, tensorboard=False)


def test_metrics_go_to_jsonl_csv_and_tensorboard(tmp_path):
    pytest.importorskip("tensorboard")
    from marag.train.logbook import Logbook

    book = Logbook(tmp_path)
    book.write({"iteration": 1, "reward": 0.5, "valid.planner": 1.0})
    book.write({"iteration": 2, "reward": 0.7, "f1": 0.2})
    book.close()
    assert [r["iteration"] for r in book.rows()] == [1, 2]
    header = (tmp_path / "metrics.csv").read_text().splitlines()[0]
    assert header == "iteration,reward,valid.planner,f1"
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(tmp_path / "tensorboard"))
    acc.Reload()
    assert [e.value for e in acc.Scalars("reward")] == pytest.approx([0.5, 0.7])
    book.truncate(1)
    assert [r["iteration"] for r in Logbook(tmp_path, tensorboard=False).rows()] == [1]


def test_periodic_heldout_evaluation_goes_into_the_row(tmp_path):
    cfg_over = ("train.iterations=1", "train.eval_every=1")
    tr = make(tmp_path, *cfg_over, questions=QUESTIONS[:2])
    tr.eval_questions = QUESTIONS[2:]
    row = tr.run()[0]
    assert 0.0 <= row["eval.f1"] <= 1.0 and "eval.valid.AG" in row
    summary = tmp_path / "eval" / "iter-000001" / "metrics.json"
    assert summary.is_file()
    traces = (tmp_path / "eval" / "iter-000001" / "traces.jsonl").read_text().splitlines()
    assert len(traces) == 2  # the held-out questions, greedy, with the updated weights
    best = json.loads((tmp_path / "best" / "best.json").read_text())
    assert best == {"iteration": 1, "score": row["eval.f1"], "metric": "eval.f1",
                    "checkpoint": "iter-000001"}
    assert (tmp_path / "best" / "policy" / "adapter_model.safetensors").is_file()


def test_kl_as_a_loss_with_an_adaptive_coefficient(tmp_path):
    import itertools
    import math

    tr = make(tmp_path, "train.iterations=3", "train.kl_mode=loss", "train.kl_coef=0.1",
              "train.kl_target=0.0001", "train.kl_horizon=10", "train.entropy_coef=0.01")
    rows = tr.run()
    assert all(math.isfinite(r[k]) for r in rows for k in ("pg_loss", "vf_loss", "kl_k3"))
    assert rows[0]["kl_coef"] == 0.1
    # each row reports the coefficient it ran with; the controller then moves it by
    # clip(kl / target - 1, -0.2, 0.2) * n / horizon, with n = the iteration's 4 trained
    # steps (sequences, as verl counts)
    for before, after in itertools.pairwise(rows):
        err = max(-0.2, min(0.2, before["kl"] / 0.0001 - 1.0))
        assert after["kl_coef"] == pytest.approx(before["kl_coef"] * (1 + err * 4 / 10))
    assert rows[0]["kl"] == 0.0  # a fresh LoRA adapter is the reference exactly
    assert rows[1]["kl"] > 0.0001 and rows[2]["kl_coef"] > rows[1]["kl_coef"]


def test_jade_with_entropy_and_kl_loss_under_the_restricted_planner_stays_finite(tmp_path):
    """The issue's reproduction on the tiny model: jade's planner decodes under a restricted
    vocabulary that excludes the pad token; entropy bonus and KL-as-loss used to make the
    gradient NaN (and the run went on, saving NaN weights)."""
    import math

    tr = make(tmp_path, "train.iterations=2", "train.entropy_coef=0.01", "train.kl_mode=loss",
              "train.estimator=turn-gae", "train.lam=1.0", method="jade")
    traces = tr.rollout(0)
    assert any(s.sampling and s.sampling.get("allowed_text") for t in traces for s in t.steps)
    rows = tr.run()
    for row in rows:
        for key in ("pg_loss", "vf_loss", "grad_norm", "grad_norm.value", "entropy", "kl_k3",
                    "kl"):
            assert math.isfinite(row[key]), (key, row[key])
        assert row["skipped_steps"] == 0
    assert all(torch.isfinite(p).all() for p in tr.policy.parameters())


def test_grpo_with_kl_in_the_reward_is_refused(tmp_path):
    from marag.train.trainer import TrainError

    with pytest.raises(TrainError, match="kl_mode: loss"):
        make(tmp_path, "train.estimator=grpo", "train.kl_mode=reward")


def test_lora_dropout_is_refused(tmp_path):
    from marag.train.trainer import TrainError

    with pytest.raises(TrainError, match="dropout"):
        make(tmp_path, "train.lora.dropout=0.1")


def test_full_fine_tuning_reference_has_no_value_head(tmp_path):
    from marag.train.policy import ReferenceLM

    tr = make(tmp_path, "train.iterations=1", "train.lora.enabled=false")
    ref = tr.learner.reference
    assert isinstance(ref, ReferenceLM)
    assert not any("value_head" in n for n, _ in ref.named_parameters())
    device = next(tr.policy.parameters()).device
    assert all(p.device == device for p in ref.parameters())


def test_jade_iteration_with_shared_prompts(tmp_path):
    """``train.share_prompts``: a whole jade iteration (the planner's prompt shared by the
    samples of a question) trains with finite statistics and moves the adapter."""
    tr = make(tmp_path, "train.iterations=1", "train.share_prompts=true",
              "train.micro_batch_size=2", method="jade")
    before = _snapshot(tr.policy)
    row = tr.run()[0]
    assert row["optimizer_steps"] >= 1 and row["skipped_steps"] == 0
    assert not any(math.isnan(v) for v in row.values() if isinstance(v, float))
    after = _snapshot(tr.policy)
    assert any(not torch.equal(before[n], after[n]) for n in after if "lora" in n)


def test_bf16_training_keeps_the_frozen_backbone_in_bf16(tmp_path):
    """Under bf16 autocast with LoRA the frozen linear weights are stored in bf16 (autocast
    would cast them at every call); rollout decoding, scoring and the update all run on
    them, the adapter, value head and output head stay float32."""
    tr = make(tmp_path, "train.iterations=1", "train.dtype=bfloat16", method="jade")
    lm = tr.policy.causal_lm()
    frozen = [p for n, p in lm.named_parameters() if "base_layer" in n]
    assert frozen and all(p.dtype == torch.bfloat16 for p in frozen)
    assert all(p.dtype == torch.float32 for p in tr.policy.parameters() if p.requires_grad)
    assert lm.get_output_embeddings().weight.dtype == torch.float32
    before = _snapshot(tr.policy)
    row = tr.run()[0]
    assert row["optimizer_steps"] >= 1 and row["skipped_steps"] == 0 and row["failed"] == 0
    after = _snapshot(tr.policy)
    assert any(not torch.equal(before[n], after[n]) for n in after if "lora" in n)


def test_a_warm_start_adapter_is_merged_and_its_value_head_loaded(tmp_path):
    """An adapter the backend merged (llms.default.adapter: an SFT warm start) is the
    reference the new LoRA trains over, and the critic starts from the value head saved
    beside it: the trainer reads the folders the backend merged, short names resolved."""
    from marag.train.policy import PolicyValue, attach_lora, save_policy

    cfg = load_config(None, ["train.lora.r=4", "train.lora.target_modules=[q_proj,v_proj]"])
    model, tok = build_tiny_model(seed=0)
    warm = PolicyValue(attach_lora(model, cfg.train.lora), model.config.hidden_size)
    with torch.no_grad():
        for name, p in warm.named_parameters():
            if "lora_B" in name or name.startswith("value_head"):
                p.normal_(0, 0.1)
    save_policy(warm, tmp_path / "warm")
    model, tok = build_tiny_model(seed=0)
    backend = HFBackend("tiny", model=model, tokenizer=tok, batch_wait_ms=0,
                        adapters=[str(tmp_path / "warm")])
    assert backend.adapters == (str(tmp_path / "warm"),)
    ctx = Context(llms={"default": backend}, config=cfg, retriever=Docs())
    tr = Trainer(load_config(None, ["method.name=llm-only", "train.lora.r=4",
                                    "train.lora.target_modules=[q_proj,v_proj]",
                                    f'llms.default.adapter=["{tmp_path / "warm"}"]']),
                 tmp_path / "run", questions=QUESTIONS, context=ctx, tensorboard=False)
    assert torch.equal(tr.policy.value_head.weight, warm.value_head.weight)
    assert torch.equal(tr.policy.value_head.bias, warm.value_head.bias)


def test_a_questions_samples_start_from_the_first_samples_prompt(tmp_path):
    # train.rollout_cache_prompts: every rollout call keeps its whole prompt (documents
    # included) in the prefix cache, so a question's later samples compute none of it again
    tr = make(tmp_path, method="vanilla")  # 2 questions x 2 samples, one at a time
    assert tr.cfg.rollout_cache_prompts is None and tr._cache_rollout_prompts()  # CPU: on
    cache = tr.backend._decoder.prefix_cache

    def rollout(on: bool) -> tuple[list, int]:
        tr.cfg.rollout_cache_prompts = on
        tr.backend.weights_updated()  # empties the cache
        before = cache.reused_tokens
        steps = [s for t in tr.rollout(0) for s in t.steps if s.is_llm]
        return steps, cache.reused_tokens - before

    on, reused_on = rollout(True)
    off, reused_off = rollout(False)
    assert len(on) == len(off) == 4
    assert [bool(s.sampling.get("cache_prompt")) for s in on] == [True] * 4
    assert not any(s.sampling.get("cache_prompt") for s in off)
    # each question's second sample found the first's whole prompt but its last token
    assert on[0].prompt_token_ids == on[1].prompt_token_ids != on[2].prompt_token_ids
    whole = sum(len(s.prompt_token_ids) - 1 for s in (on[1], on[3]))
    assert reused_on >= whole > reused_off
    # the same seeds draw the same replies from cached and computed KV
    assert [s.token_ids for s in on] == [s.token_ids for s in off]
    # one sample a question shares nothing: the flag stays off
    single = make(tmp_path / "one", "train.samples_per_question=1", method="vanilla")
    assert not any(s.sampling.get("cache_prompt")
                   for t in single.rollout(0) for s in t.steps if s.is_llm)
