"""One training iteration of the tiny model, run by test_distributed.py in 1 or 2 processes
(``accelerate launch``); the main process saves the trainable parameters it ends with."""

from __future__ import annotations

import sys

import torch

from marag.config import load_config
from marag.llm.hf_local import HFBackend
from marag.llm.tiny import build_tiny_model
from marag.train.trainer import Trainer
from marag.types import Question
from marag.workflows import Context


def main(out: str) -> None:
    torch.set_num_threads(1)
    questions = [Question(f"q{i}", f"Question number {i}: what is the capital of France?",
                          ["Paris"]) for i in range(4)]
    cfg = load_config(None, [
        # exact fp32 and token-level GAE: these tests compare runs, not estimators
        "train.dtype=float32", "train.estimator=gae", "train.lam=0.95",
        "method.name=llm-only", "train.iterations=1", "train.questions_per_iteration=4",
        "train.samples_per_question=2", "train.concurrency=1", "train.minibatch_size=8",
        "train.micro_batch_size=2", "train.lr=1e-3", "train.critic_lr=1e-3", "train.lora.r=4",
        "train.lora.target_modules=[q_proj,v_proj]", "train.seed=5", "train.save_rollouts=false"])
    model, tok = build_tiny_model(seed=0)
    backend = HFBackend("tiny", model=model, tokenizer=tok, batch_wait_ms=0, max_batch_size=1)
    ctx = Context(llms={"default": backend}, config=cfg)
    torch.manual_seed(0)
    trainer = Trainer(cfg, out, questions=questions, context=ctx, tensorboard=False)
    rows = trainer.run()
    if trainer.acc.is_main_process:
        params = {n: p.detach().cpu() for n, p in trainer.policy.named_parameters()
                  if p.requires_grad}
        torch.save({"params": params, "row": rows[-1],
                    "world": trainer.acc.num_processes}, f"{out}/result.pt")
    trainer.acc.wait_for_everyone()
    trainer.acc.end_training()  # as `marag train` does: leave the process group before exiting


if __name__ == "__main__":
    main(sys.argv[1])
