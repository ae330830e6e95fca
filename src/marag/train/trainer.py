"""``marag train``: the phase-named loop of JADE's Algorithm 2 (and MMOA-RAG's, M-ASK's,
MAO-ARAG's, which differ only in rewards and trained roles).

Each iteration: **rollout** (the method runs on a batch of training questions with the
policy sampling, through the batched hf backend) -> **score** (per-step rewards of the
method's paper) -> **experience** (the trainable roles' steps, one buffer) -> **logprobs**
(old and reference logprobs and values, no grad) -> **advantages** -> **update** (clipped
PPO on shuffled mixed mini-batches) -> **sync** (the rollout backend drops stale caches) ->
**checkpoint** -> **evaluate** (every ``eval_every`` iterations, on the held-out split).

Everything random is a function of ``(train.seed, iteration)``, so an iteration run after a
resume is the iteration that would have run without the interruption. Data parallelism
goes through ``accelerate`` (one process per device; each process rolls out its share of
the questions; gradients are averaged by DDP). With rollouts from a server the policy may
also be sharded by FSDP2: then every forward pass goes through the sharded module, each
process runs as many of them as its peers (FSDP gathers parameters collectively), and the
adapter sync and checkpoints gather the whole trainable tensors first.
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from marag.config import Config
from marag.llm.trainable import TrainableBackend
from marag.methods import get_method
from marag.train import advantages as adv_mod
from marag.train import checkpoint as ckpt
from marag.train import core
from marag.train.errors import TrainError
from marag.train.experience import Transition, collect
from marag.train.learner import Learner, frozen_storage_dtype
from marag.train.logbook import Logbook
from marag.train.policy import (
    build_policy,
    full_trainable,
    load_value_head,
    store_frozen_linears,
)
from marag.train.rewards import step_rewards
from marag.train.sync import ServerSync
from marag.train.timing import Phases
from marag.train.topology import (  # noqa: F401 - DEFAULT_ROLES, METHOD_ROLES: read from here
    DEFAULT_ROLES,
    METHOD_ROLES,
    TopologyError,
    check_topology,
    frozen_message,
    frozen_roles_on,
    roles_on,
    trained_roles,
    users_message,
)
from marag.train.trajectory import merge_trajectories
from marag.types import Question, Trace, write_jsonl
from marag.workflows import Context, run_method
from marag.workflows.engine import derive_seed

log = logging.getLogger(__name__)


class Trainer:
    def __init__(self, config: Config, out: str | Path, *, questions: Sequence[Question],
                 eval_questions: Sequence[Question] = (), context: Context | None = None,
                 accelerator: Any = None, tensorboard: bool = True) -> None:
        from accelerate import Accelerator

        self.config = config
        self.cfg = config.train
        self.out = Path(out)
        self.acc = accelerator or Accelerator(cpu=not torch.cuda.is_available())
        self.sharded = _sharded(self.acc)
        refuse_sharding(self.sharded, self.cfg.rollout, self.cfg.share_prompts)
        self.roles = trained_roles(config)
        check_settings(config)
        if not questions:
            raise TrainError("no training questions")
        self.questions = list(questions)
        self.eval_questions = list(eval_questions)
        self._orders: dict[int, list[int]] = {}  # pass over the data -> shuffled indices
        # the llms entries, checked from the config before any model loads
        self.topology = check_topology(config)
        from marag.api import build_context

        # the policy's weights are trained: float32 on CPU unless a dtype is named explicitly
        self.ctx = context or build_context(config, purpose="training")
        self.backend, server = self._backends()
        self.tokenizer = self.backend.tokenizer
        self._build_policy()
        self.kl = core.AdaptiveKL(self.cfg.kl_coef, self.cfg.kl_target, self.cfg.kl_horizon,
                                  low=self.cfg.kl_coef_min, high=self.cfg.kl_coef_max)
        self.start = 0  # iterations already done
        self.logbook: Logbook | None = None
        if self.acc.is_main_process:
            self.out.mkdir(parents=True, exist_ok=True)
            self.logbook = Logbook(self.out, tensorboard=tensorboard)
        # rollout: server: the server the trained roles decode on and the adapter it serves
        self.sync: ServerSync | None = None
        if server is not None:
            self.sync = ServerSync(server, self.backend, self.policy, self.acc,
                                   folder=self.cfg.sync_dir or self.out / "sync",
                                   sharded=self.sharded)
        self._resume()
        if self.sync is not None:  # the server starts from the weights training starts from
            self.sync.push(self.start)

    # ------------------------------------------------------------------ set-up

    def _backends(self) -> tuple[TrainableBackend, Any]:
        """The policy backend the trainer scores and updates, and the openai backend the
        trained roles decode on (None with local rollouts), from the context.

        ``check_topology`` decided what the config says; this checks what only the built
        backends say: whether another llms entry reaches the trained model (hf entries that
        name the same model share one unless ``share: false``), and whether a context built
        in code holds the kinds of backends its config names."""
        top = self.topology
        rollout = self.ctx.llms[top.rollout_llm]
        frozen = frozen_roles_on(self.config, self.roles,
                                 lambda entry: self.ctx.llms.get(entry) is rollout)
        if frozen:
            raise TopologyError(frozen_message(frozen, top.rollout_llm))
        if not top.server:
            return self._trainable(top.rollout_llm), None
        from marag.llm.openai_http import OpenAIBackend

        if not isinstance(rollout, OpenAIBackend) or not rollout.token_ids:
            raise TrainError(f"llms.{top.rollout_llm}: the context holds backend "
                             f"{_kind(rollout)}, not the openai backend with token_ids that "
                             "the config names (train.rollout: server)")
        backend = self._trainable(top.policy_llm)
        users = roles_on(self.config, lambda entry: self.ctx.llms.get(entry) is backend)
        if users:
            raise TopologyError(users_message(users, top.policy_llm, top.rollout_llm))
        return backend, rollout

    def _trainable(self, name: str) -> TrainableBackend:
        backend = self.ctx.llms[name]
        if not isinstance(backend, TrainableBackend):
            raise TrainError(f"llms.{name}: the context holds backend {_kind(backend)}, not "
                             "the local 'hf' backend that the config names for training")
        return backend

    def _build_policy(self) -> None:
        model = self.backend.module
        cfg = self.cfg
        if cfg.lora.enabled and cfg.lora.dropout > 0:
            raise TrainError(
                f"train.lora.dropout {cfg.lora.dropout:g}: dropout makes the update's forward "
                "pass another function than the scoring pass, so PPO's ratios would measure "
                "dropout noise; set train.lora.dropout: 0")
        if cfg.gradient_checkpointing and cfg.share_prompts:
            # the layers' replay would drop the prompts' keys and values
            raise TrainError("train.gradient_checkpointing and train.share_prompts do not "
                             "go together (the shared prompts' keys and values are a cache, "
                             "which checkpointed layers drop); set one of them false")
        # LoRA: adapters named in llms.*.adapter (an SFT warm start) are already merged into
        # the backend's weights: they are the reference (the backbone with the new adapter
        # off), and a new adapter trains on top. Full fine-tuning: a frozen copy.
        self.policy, reference = build_policy(
            model, cfg.lora, critic=cfg.critic, reference=True,
            gradient_checkpointing=cfg.gradient_checkpointing)
        self.reference = reference
        adapters = self.backend.adapters  # folders, with short names resolved
        if adapters:  # a critic trained with the last adapter starts from its value head
            load_value_head(self.policy, adapters[-1])
        uses_kl = cfg.kl_coef > 0 or cfg.kl_target is not None
        frozen = frozen_storage_dtype(cfg.dtype, self.acc.device, cfg.lora.enabled,
                                      self.sharded)
        if frozen is not None:  # the frozen backbone in the dtype every pass computes it in
            store_frozen_linears(model, frozen)
        self.learner = Learner(self.policy, cfg, self.acc, reference=reference,
                               pad_id=self.backend.pad_id,
                               eos_ids=sorted(self.backend.eos_ids),
                               allowed=self._allowed, sharded=self.sharded, uses_kl=uses_kl)
        self.module, self.optimizer = self.learner.module, self.learner.optimizer
        self.scheduler = self.learner.scheduler
        if self.learner.dtype == torch.bfloat16 and self.cfg.rollout == "local":
            # local rollouts decode with the policy's own module; on the CPU the decoder then
            # autocasts as the learner scores, so the rollout's logprobs and the trainer's
            # stay close (on a GPU it decodes in the loaded dtype)
            self.backend.bf16_autocast = True
        n_train = sum(p.numel() for p in self.learner.policy_params)
        log.info("policy: %s, %d trainable parameters (+ value head), computing in %s",
                 "LoRA" if cfg.lora.enabled else "full fine-tuning", n_train,
                 str(self.learner.dtype).removeprefix("torch."))

    def _resume(self) -> None:
        path = ckpt.latest(self.out / "checkpoints")
        if path is None:
            return
        state = ckpt.load(path, self.policy, self.optimizer, self.scheduler,
                          sharded=bool(self.sharded))
        self.start = int(state["iteration"])
        self.learner.reschedule()  # a changed train.iterations moves a cosine schedule
        self.kl.coef = float(state.get("kl_coef", self.kl.coef))
        if self.logbook is not None:
            self.logbook.truncate(self.start)
        self.backend.weights_updated()
        log.info("resumed from %s (iteration %d done)", path, self.start)

    # ------------------------------------------------------------------ data

    def batch_questions(self, iteration: int) -> list[Question]:
        """This process's share of iteration ``iteration``'s questions (0-based). The order
        is a seeded shuffle per pass over the data, so it depends only on the seed."""
        n = len(self.questions)
        per = self.cfg.questions_per_iteration
        picked = []
        for k in range(iteration * per, (iteration + 1) * per):
            epoch, i = divmod(k, n)
            picked.append(self.questions[self._order(epoch)[i]])
        return picked[self.acc.process_index::self.acc.num_processes]

    def _order(self, epoch: int) -> list[int]:
        if epoch not in self._orders:
            g = torch.Generator().manual_seed(derive_seed(self.cfg.seed, "order", epoch))
            self._orders[epoch] = torch.randperm(len(self.questions), generator=g).tolist()
        return self._orders[epoch]

    # ------------------------------------------------------------------ phases

    def rollout(self, iteration: int) -> list[Trace]:
        cfg = self.config.model_copy(deep=True)
        cfg.sampling.temperature = self.cfg.temperature
        cfg.sampling.top_p = self.cfg.top_p
        cfg.sampling.seed = derive_seed(self.cfg.seed, "rollout", iteration)
        if cfg.method.name == "m-ask" and not self.cfg.rewards.final_only:
            # the turn-level reward scores the answer of every turn (M-ASK S3.3); inference
            # and held-out evaluation answer once, at the end
            cfg.method.answer_every_turn = True
        ctx = Context(llms=self.ctx.llms, config=cfg, retriever=self.ctx.retriever,
                      logprobs=True, cache_prompts=self._cache_rollout_prompts())
        jobs = [(q, s) for q in self.batch_questions(iteration)
                for s in range(self.cfg.samples_per_question)]
        name = cfg.method.name
        limit = asyncio.Semaphore(self.cfg.concurrency)

        async def one(q: Question, s: int) -> Trace:
            async with limit:
                return await run_method(name, q, ctx, s)

        async def go() -> list[Trace]:
            return list(await asyncio.gather(*(one(q, s) for q, s in jobs)))

        self.module.eval()
        return asyncio.run(go())

    def _cache_rollout_prompts(self) -> bool:
        """Whether rollout calls keep their whole prompts cached (train.rollout_cache_prompts)."""
        c = self.cfg
        if c.samples_per_question < 2 or c.rollout != "local":
            return False
        if c.rollout_cache_prompts is not None:
            return c.rollout_cache_prompts
        return self.acc.device.type == "cpu"

    def _allowed(self, t: Transition) -> torch.Tensor | None:
        """The vocabulary mask the rollout decoded with (the backend's own)."""
        return self.backend.allowed_mask(t.allowed_text) if t.allowed_text else None

    def _all_sum(self, x: float) -> float:
        return self.learner._all_sum(x)

    # ------------------------------------------------------------------ loop

    def iteration(self, it: int) -> dict[str, Any]:
        """Run iteration ``it`` (0-based) and return its metrics row."""
        cfg = self.cfg
        phase = Phases(cuda=self.acc.device.type == "cuda")
        used = {"kl_coef": self.kl.coef, "lr": self.optimizer.param_groups[0]["lr"]}
        with phase("rollout"):
            traces = self.rollout(it)
            if self.sync is not None:
                self.sync.check(traces, self.roles)

        with phase("score"):
            rewards = [step_rewards(t, cfg.rewards) for t in traces]
            for trace, rs in zip(traces, rewards):
                for step, r in zip(trace.steps, rs):
                    step.reward = r
            transitions = collect(traces, rewards, self.roles)
            if get_method(self.config.method.name).sequences == "trajectory":
                transitions = merge_trajectories(traces, transitions, self.tokenizer)

            dropped = 0
            if cfg.drop_flat_groups:
                flat = adv_mod.flat_groups(transitions)
                kept = [t for t in transitions if t.group not in flat]
                dropped = len({t.group for t in transitions}) - len({t.group for t in kept})
                transitions = kept

        with phase("logprobs"):
            critic = cfg.estimator not in adv_mod.CRITIC_FREE
            self.learner.score(transitions, values=critic,
                               old=cfg.old_logprobs == "recompute")
            gap = self._logprob_gap(transitions)

        with phase("advantages"):
            adv_mod.compute(transitions, cfg.estimator, gamma=cfg.gamma, lam=cfg.lam,
                            kl_coef=self.kl.coef, kl_in_reward=cfg.kl_mode == "reward",
                            scale_rewards=cfg.scale_rewards)
            explained = (adv_mod.explained_variance(transitions)
                         if critic and cfg.vf_coef > 0 else None)
            if explained is not None and explained < 0:
                log.warning("iteration %d: the value head's explained variance is %.3f (< 0): "
                            "its advantages are noisier than none; consider a critic-free "
                            "estimator (grpo, rloo)", it + 1, explained)
            if cfg.whiten_advantages and critic:
                s, sq, n = adv_mod.whiten_stats(transitions)
                adv_mod.apply_whitening(transitions, self._all_sum(s), self._all_sum(sq),
                                        self._all_sum(n))

        with phase("update"):
            self.learner.kl_coef = self.kl.coef
            self.learner.actor_frozen = it < cfg.critic_warmup
            stats = self.learner.update(
                transitions, lambda epoch: derive_seed(cfg.seed, "shuffle", it, epoch,
                                                       self.acc.process_index))

        with phase("sync"):
            self.backend.weights_updated()
            if self.sync is not None:
                self.sync.push(it + 1)

        kl_now = self._kl_now(transitions)
        if kl_now is not None:
            self.kl.update(kl_now, int(self._all_sum(float(len(transitions)))))
        row = self._row(it, traces, transitions, stats, phase.seconds, kl_now) | used
        row["logprob_gap"] = gap
        row["groups_dropped"] = dropped
        row["actor_frozen"] = int(it < cfg.critic_warmup)
        # on a GPU: the most memory PyTorch held in each phase, this process (GiB)
        row.update({f"peak_gib.{k}": round(v, 3) for k, v in phase.peak_gib.items()})
        if explained is not None and not math.isnan(explained):  # NaN: the returns were flat
            row["value_explained_variance"] = explained
        if self.acc.is_main_process:
            self._save_rollouts(it, traces)
        return row

    def _logprob_gap(self, transitions: Sequence[Transition]) -> float:
        """Mean |rollout logprob - the trainer's old logprob| per trained token, all
        processes: float noise when the rollouts came from the weights being trained."""
        # a merged trajectory's earlier turns have no rollout logprobs (NaN): not compared
        s = n = 0.0
        for t in transitions:
            if t.old_logprobs is None:
                continue
            known = ~torch.isnan(torch.tensor(t.rollout_logprobs))
            diff = (torch.tensor(t.rollout_logprobs) - t.old_logprobs)[known]
            s += float(diff.abs().sum())
            n += float(known.sum())
        total, count = self._all_sum(s), self._all_sum(float(n))
        gap = total / count if count else 0.0
        limit = self.cfg.max_logprob_gap
        if limit is not None and gap > limit:
            raise TrainError(
                f"rollout logprobs differ from the policy's by {gap:.4g} per token on average "
                f"(train.max_logprob_gap {limit:g}): the rollouts did not come from the weights "
                "being trained (a server that did not reload the adapter, another base model, "
                "logprobs before temperature: vLLM's --logprobs-mode processed_logprobs)")
        return gap

    def _kl_now(self, transitions: Sequence[Transition]) -> float | None:
        """Mean k1 KL to the reference per trained token (None when no reference pass ran:
        nothing uses the KL)."""
        if not self.learner.uses_kl:
            return None
        s = sum(float((t.old_logprobs - t.ref_logprobs)[t.trained_mask()].sum())
                for t in transitions if t.old_logprobs is not None and t.ref_logprobs is not None)
        n = sum(t.trained_tokens for t in transitions)
        total, count = self._all_sum(s), self._all_sum(float(n))
        return total / count if count else 0.0

    def _row(self, it: int, traces: list[Trace], transitions: list[Transition],
             stats: dict[str, float], times: dict[str, float], kl: float | None
             ) -> dict[str, Any]:
        from accelerate.utils import gather_object

        from marag.eval.summary import role_validity, workflow_type

        local = [{"f1": t.metrics.get("f1", 0.0), "em": t.metrics.get("em", 0.0),
                  "reward": sum(s.reward or 0.0 for s in t.steps),
                  "workflow": workflow_type(t), "failed": t.status == "failed",
                  "prompt_tokens": t.cost.prompt_tokens,
                  "completion_tokens": t.cost.completion_tokens,
                  "validity": role_validity([t])} for t in traces]
        everyone = gather_object(local) if self.acc.num_processes > 1 else local
        n = max(1, len(everyone))
        row: dict[str, Any] = {"iteration": it + 1, "traces": len(everyone),
                               "transitions": int(self._all_sum(float(len(transitions))))}
        for key in ("reward", "f1", "em", "prompt_tokens", "completion_tokens"):
            row[key] = sum(float(e[key]) for e in everyone) / n
        row["failed"] = sum(1 for e in everyone if e["failed"])
        valid: Counter[str] = Counter()
        total: Counter[str] = Counter()
        for e in everyone:
            for role, v in e["validity"].items():
                valid[role] += v["valid"]
                total[role] += v["total"]
        for role in sorted(total):
            if role != "R":
                row[f"valid.{role}"] = valid[role] / total[role]
        for wf, c in Counter(e["workflow"] for e in everyone).items():
            row[f"workflow.{wf}"] = c / n
        if kl is not None:
            row["kl"] = kl
        row.update({k: round(v, 6) for k, v in stats.items()})
        row.update({f"seconds.{k}": round(v, 3) for k, v in times.items()})
        row["seconds"] = round(sum(times.values()), 3)
        row["trained_tokens"] = int(self._all_sum(float(sum(t.trained_tokens
                                                            for t in transitions))))
        return row

    def _save_rollouts(self, it: int, traces: list[Trace]) -> None:
        if self.cfg.save_rollouts:
            write_jsonl(self.out / "rollouts" / f"iter-{it + 1:06d}.jsonl", traces)

    def evaluate(self, it: int) -> dict[str, float]:
        from marag.eval.runner import evaluate

        async def method(question: Question, context: Any) -> Trace:
            return await run_method(self.config.method.name, question, context)

        async def go() -> Any:
            return await evaluate(self.eval_questions, method, self.ctx,
                                  self.out / "eval" / f"iter-{it + 1:06d}",
                                  method_name=self.config.method.name,
                                  concurrency=self.config.eval.concurrency, force=True)

        self.module.eval()
        result = asyncio.run(go())
        s = result.summary
        out = {"eval.f1": s["f1"], "eval.em": s["em"], "eval.acc": s["acc"]}
        for role, v in s.get("roles", {}).items():
            if role != "R":
                out[f"eval.valid.{role}"] = v["rate"]
        return out

    def save(self, it: int) -> None:
        whole = opt_state = None
        if self.sharded:  # every process takes part in the gathers; the main one writes
            whole = full_trainable(self.policy)
            opt_state = ckpt.optimizer_state_by_name(self.policy, self.optimizer)
        if self.acc.is_main_process:
            ckpt.save(self.out / "checkpoints", it + 1, self.policy, self.optimizer,
                      self.scheduler, {"kl_coef": self.kl.coef}, self.cfg.keep_checkpoints,
                      trainable=whole, optimizer_state=opt_state)
        self.acc.wait_for_everyone()

    def run(self, progress: bool = False) -> list[dict[str, Any]]:
        """Train from the last checkpoint to ``train.iterations``; returns the new rows."""
        from tqdm import tqdm

        rows = []
        bar = tqdm(range(self.start, self.cfg.iterations), initial=self.start,
                   total=self.cfg.iterations, disable=not (progress and self.acc.is_main_process),
                   desc="train", unit="it")
        for it in bar:
            row = self.iteration(it)
            last = it + 1 == self.cfg.iterations
            if self.eval_questions and self.cfg.eval_every and (
                    (it + 1) % self.cfg.eval_every == 0 or last):
                if self.acc.is_main_process:
                    row.update(self.evaluate(it))
                self.acc.wait_for_everyone()
            # the row first: a kill before the checkpoint re-runs the iteration, and resuming
            # drops rows past the checkpoint
            if self.logbook is not None:
                self.logbook.write(row)
            evaluated = "eval.f1" in row
            if (it + 1) % self.cfg.save_every == 0 or last or evaluated:
                self.save(it)
            if evaluated and self.acc.is_main_process:
                # the checkpoint with the best evaluation F1 stays in <out>/best/policy
                ckpt.keep_best(self.out, self.out / "checkpoints" / f"iter-{it + 1:06d}",
                               it + 1, row["eval.f1"], "eval.f1")
            bar.set_postfix(reward=f"{row['reward']:.3f}", f1=f"{row['f1']:.3f}")
            rows.append(row)
        if self.logbook is not None:
            self.logbook.close()
        return rows

    def export(self, dest: str | Path) -> Path:
        """Write the current policy (adapter or full model, and value head) to ``dest``.
        Every process calls this (under FSDP they gather the tensors); the main one writes."""
        from marag.train.policy import save_policy

        whole = full_trainable(self.policy) if self.sharded else None
        if self.acc.is_main_process:
            save_policy(self.policy, dest, whole)
        self.acc.wait_for_everyone()
        return Path(dest)


def check_settings(config: Config) -> None:
    """Settings that cannot train correctly together are refused with the fix."""
    cfg = config.train
    if (cfg.estimator in adv_mod.CRITIC_FREE and cfg.kl_mode == "reward"
            and (cfg.kl_coef or cfg.kl_target)):
        raise TrainError(
            f"train.estimator {cfg.estimator} compares each question's returns within its "
            "group: a KL penalty in the reward would be normalised with them and decide the sign of "
            "the advantages. Set train.kl_mode: loss (k3 in the loss, as GRPO does) or "
            "train.kl_coef: 0")
    if cfg.samples_per_question < 2 and (cfg.estimator in adv_mod.CRITIC_FREE
                                         or cfg.drop_flat_groups):
        what = ("train.drop_flat_groups drops every question" if cfg.drop_flat_groups
                else f"train.estimator {cfg.estimator} gives every trace advantage 0")
        raise TrainError(f"{what} with one sample per question: set "
                         "train.samples_per_question to 2 or more")
    if cfg.critic_warmup and (cfg.estimator in adv_mod.CRITIC_FREE or cfg.vf_coef == 0):
        why = (f"train.estimator {cfg.estimator} has no critic" if cfg.estimator
               in adv_mod.CRITIC_FREE else "train.vf_coef 0 never trains the value head")
        raise TrainError(f"train.critic_warmup {cfg.critic_warmup}: {why}, so the warm-up "
                         "iterations would train nothing; set train.critic_warmup: 0")
    if (cfg.old_logprobs == "rollout"
            and get_method(config.method.name).sequences == "trajectory"):
        raise TrainError(
            f"train.old_logprobs rollout: {config.method.name} trains each trajectory as one "
            "sequence whose earlier turns were re-tokenised, so the rollout has no logprobs "
            "for them; use train.old_logprobs: recompute")
    if cfg.top_p < 1.0:
        log.warning("train.top_p %g: rollouts sample from the nucleus but the trainer scores "
                    "the full tempered distribution, so the updates are slightly off-policy; "
                    "train.top_p 1.0 samples what is scored", cfg.top_p)


def refuse_sharding(mode: str, rollout: str, share_prompts: bool = False) -> None:
    """Which parameter-sharding setups the trainer runs, and why not the others.

    FSDP2 runs with rollouts from a server: every forward pass then goes through the sharded
    module and the adapter sync and checkpoints gather the whole tensors. With local rollouts
    the backend decodes token by token with the training module itself, which a sharded
    module could only do by gathering every layer for every token. FSDP1 wraps the module in
    flat parameters that the adapter toggling and the gathers here do not handle, and
    DeepSpeed's engine owns the optimizer step and checkpoints in its own way."""
    if mode == "FSDP2" and share_prompts:
        # a shared micro-batch makes a second pass for the responses only when it has any:
        # ranks would then run different numbers of per-layer gathers and hang
        raise TrainError(
            "train.share_prompts runs a micro-batch's prompts and responses as two passes, "
            "which FSDP2's per-layer collectives cannot pair across ranks; set "
            "train.share_prompts: false for a sharded run (DDP supports it)")
    if not mode or (mode == "FSDP2" and rollout == "server"):
        return
    if mode == "FSDP1":
        raise TrainError(
            "accelerate runs FSDP version 1; the trainer supports FSDP2 (fsdp_version: 2, as in "
            "configs/accelerate/fsdp-gpu.yaml) with train.rollout: server, or DDP")
    if mode.startswith("DeepSpeed"):
        raise TrainError(
            f"accelerate runs {mode}, which the trainer does not support (DeepSpeed's engine "
            "owns the optimizer step, gradient clipping and checkpoints). Launch with DDP "
            "(configs/accelerate/ddp-*.yaml) or, with train.rollout: server, FSDP2 "
            "(configs/accelerate/fsdp-gpu.yaml)")
    raise TrainError(
        f"accelerate runs {mode}, which shards the policy, while rollouts decode with that "
        "very module (train.rollout: local), one token at a time. Launch with DDP "
        "(configs/accelerate/ddp-*.yaml), or decode on a server (train.rollout: server, see "
        "docs/training.md), which FSDP2 supports")


def _kind(backend: Any) -> str:
    """A backend object as an error names it."""
    return repr(getattr(backend, "name", type(backend).__name__))


def _sharded(acc: Any) -> str:
    """The name of accelerate's parameter-sharding mode in use ('' for none/DDP)."""
    kind = str(getattr(acc.state, "distributed_type", ""))
    if "FSDP" in kind:
        plugin = getattr(acc.state, "fsdp_plugin", None)
        return f"FSDP{getattr(plugin, 'fsdp_version', 1)}"
    if "DEEPSPEED" in kind:
        plugin = getattr(acc.state, "deepspeed_plugin", None)
        stage = getattr(plugin, "zero_stage", None)
        return f"DeepSpeed ZeRO-{stage}" if stage else "DeepSpeed"
    for env, name in (("ACCELERATE_USE_FSDP", "FSDP"), ("ACCELERATE_USE_DEEPSPEED", "DeepSpeed")):
        if os.environ.get(env, "false").lower() == "true":
            # accelerate (1.15) selects FSDP only for GPU-like devices, DeepSpeed never with
            # cpu: on a CPU it would run plain data parallelism instead of what was asked for
            raise TrainError(
                f"accelerate was launched for {name} but runs {kind or 'one process'}: "
                f"accelerate enables {name} on GPUs only. Launch with "
                "configs/accelerate/ddp-cpu.yaml on a CPU")
    return ""
