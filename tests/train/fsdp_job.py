"""Training of the tiny model with rollouts from a server (a serve-llm the test runs), by
test_distributed.py in one plain process or in 2 processes with the policy sharded by FSDP2.

The FSDP run does iteration 1, checkpoints, then builds a fresh trainer on the same folder
that resumes from the checkpoint and does iteration 2; the main process saves the trainable
parameters and metrics rows it ends with.

accelerate (1.15) selects FSDP only on GPU-like devices (on a CPU ``accelerate launch
--use_fsdp`` runs plain DDP). FSDP2 itself runs on a CPU with gloo, so the sharded run sets
the state accelerate sets on GPUs (distributed type FSDP, an FSDP2 plugin) on a CPU
Accelerator; ``prepare``, the sharding and every gather are then accelerate's and torch's own.
"""

from __future__ import annotations

import sys

import torch

from marag.config import load_config
from marag.llm.hf_local import HFBackend
from marag.llm.openai_http import OpenAIBackend
from marag.llm.tiny import build_tiny_model
from marag.train.trainer import Trainer
from marag.types import Question
from marag.workflows import Context

LORA = "policy-lora"


def accelerator(fsdp: bool):
    from accelerate import Accelerator
    from accelerate.state import PartialState
    from accelerate.utils import DistributedType, FullyShardedDataParallelPlugin

    acc = Accelerator(cpu=True)
    if fsdp:
        assert acc.num_processes == 2, acc.num_processes
        acc.state.fsdp_plugin = FullyShardedDataParallelPlugin(
            fsdp_version=2, reshard_after_forward=True, state_dict_type="FULL_STATE_DICT")
        # both shared states, as accelerate's AcceleratorState sets them on GPUs (every later
        # AcceleratorState() copies PartialState's over its own)
        acc.state.distributed_type = DistributedType.FSDP
        PartialState._shared_state["distributed_type"] = DistributedType.FSDP
    return acc


def trainer(out: str, url: str, iterations: int, acc) -> Trainer:
    questions = [Question(f"q{i}", f"Question number {i}: what is the capital of France?",
                          ["Paris"]) for i in range(4)]
    cfg = load_config(None, [
        # exact fp32 and token-level GAE: these tests compare runs, not estimators
        "train.dtype=float32", "train.estimator=gae", "train.lam=0.95",
        "method.name=llm-only", f"train.iterations={iterations}",
        "train.questions_per_iteration=4", "train.samples_per_question=2",
        "train.concurrency=2", "train.minibatch_size=8", "train.micro_batch_size=2",
        "train.lr=1e-2", "train.critic_lr=1e-3", "train.lora.r=4",
        "train.lora.target_modules=[q_proj,v_proj]", "train.seed=5", "train.save_every=1",
        "train.save_rollouts=false", "method.max_tokens.default=8",
        "llms.rollout.backend=openai", f"llms.rollout.base_url={url}",
        f"llms.rollout.model={LORA}", "llms.rollout.token_ids=true", "llms.policy.backend=hf",
        "roles.default=rollout", "train.rollout=server", "train.policy_llm=policy"])
    model, tok = build_tiny_model(seed=0)
    llms = {"rollout": OpenAIBackend(url, LORA, token_ids=True, retries=0),
            "policy": HFBackend("tiny", model=model, tokenizer=tok, batch_wait_ms=0)}
    torch.manual_seed(0)
    return Trainer(cfg, out, questions=questions, context=Context(llms=llms, config=cfg),
                   accelerator=acc, tensorboard=False)


def main(out: str, url: str, mode: str) -> None:
    torch.set_num_threads(1)
    acc = accelerator(mode == "fsdp")
    if mode == "fsdp":
        first = trainer(out, url, 1, acc)
        rows = first.run()
        acc.free_memory()  # the first trainer's module and optimizer leave the accelerator
        resumed = trainer(out, url, 2, acc)  # a fresh module, sharded, loads iter-1
        assert resumed.start == 1, resumed.start
        rows += resumed.run()
        last = resumed
    else:
        last = trainer(out, url, 2, acc)
        rows = last.run()
    last.export(f"{out}/policy")
    from marag.train.policy import full_trainable

    params = full_trainable(last.policy)
    kinds = sorted({type(p).__name__ for p in last.policy.parameters() if p.requires_grad})
    if acc.is_main_process:
        torch.save({"params": params, "rows": rows, "world": acc.num_processes,
                    "sharded": last.sharded, "kinds": kinds}, f"{out}/result.pt")
    acc.wait_for_everyone()
    acc.end_training()  # as `marag train` does: leave the process group before exiting


if __name__ == "__main__":
    main(*sys.argv[1:4])
