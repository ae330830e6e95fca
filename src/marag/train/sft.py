"""Supervised warm start: examples from traces (rejection sampling) or MMOA-RAG's recipe,
then cross-entropy on the response tokens of a LoRA-adapted (or fully tuned) backbone.

* ``examples_from_traces``: the valid steps of chosen roles in traces that scored
  ``F1 >= min_f1`` -- the policy's own best rollouts, or a stronger model's traces (any
  backend: the target is the completion text, re-tokenised for this model).
* ``examples_mmoa``: MMOA-RAG S4.3 -- the selector's label is the ids of the retrieved
  documents that share a content word with the golden answer (or most of the question's
  content words: marag's reading of Figure 2), the generator's label is the golden answer,
  each in the role's own output format.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from marag.config import SFTConfig
from marag.llm.chat import prompt_ids, text_ids
from marag.roles.prompt import content_words
from marag.types import Question, Trace

log = logging.getLogger(__name__)


@dataclass
class Example:
    role: str
    messages: list[dict[str, str]]
    target: str


def examples_from_traces(traces: Sequence[Trace], roles: Sequence[str], min_f1: float
                         ) -> list[Example]:
    keep = set(roles)
    out = []
    for t in traces:
        if t.status == "failed" or t.metrics.get("f1", 0.0) < min_f1:
            continue
        for s in t.steps:
            if s.is_llm and s.valid and (not keep or s.role in keep) and s.raw.strip():
                out.append(Example(s.role, s.messages, s.raw))
    return out


def useful_documents(question: str, answers: Sequence[str], docs: Sequence[Any],
                     min_question_overlap: float) -> list[int]:
    qw = content_words(question)
    aw = set().union(*(content_words(a) for a in answers)) if answers else set()
    picked = []
    for i, d in enumerate(docs):
        dw = content_words(f"{d.title} {d.text}")
        if (aw and aw & dw) or (qw and len(qw & dw) / len(qw) >= min_question_overlap):
            picked.append(i)
    return picked


async def examples_mmoa(questions: Sequence[Question], retriever: Any, k: int,
                        cfg: SFTConfig) -> list[Example]:
    """Selector (DS) and generator (AG) examples for each question from ``k`` retrieved
    documents (the question itself is the query, as MMOA-RAG's QR labels come from a file)."""
    from marag.roles import get_role

    ds, ag = get_role("DS"), get_role("AG")
    hits = await retriever.search([q.question for q in questions], k)
    out = []
    for q, h in zip(questions, hits):
        if not q.golden_answers or not h.passages:
            continue
        docs = h.passages
        ids = useful_documents(q.question, q.golden_answers, docs, cfg.min_question_overlap)
        if ids:
            out.append(Example("DS", ds.build(question=q.question, docs=docs),
                               "<id>" + ", ".join(str(i) for i in ids) + "</id>"))
        kept = [docs[i] for i in ids] if ids and cfg.ag_docs == "selected" else list(docs)
        out.append(Example("AG", ag.build(question=q.question, docs=kept),
                           f"<answer>{q.golden_answers[0]}</answer>"))
    return out


def tokenize(examples: Sequence[Example], tokenizer: Any, eos: int) -> list[Any]:
    """Examples as transitions (prompt ids, response ids ending in EOS), for the policy's
    batching and logprob code."""
    from marag.train.experience import Transition

    out = []
    for i, e in enumerate(examples):
        resp = text_ids(tokenizer, e.target) + [eos]
        out.append(Transition(trace=i, group=i, order=0, role=e.role,
                              prompt_ids=prompt_ids(tokenizer, e.messages), response_ids=resp,
                              rollout_logprobs=[], temperature=1.0))
    return out


def train_sft(backend: Any, examples: Sequence[Example], cfg: SFTConfig, out: str | Path,
              progress: bool = False) -> list[dict[str, float]]:
    """Fine-tune ``backend.module`` on ``examples``; the adapter (or model) goes to
    ``out/policy``. Returns the per-step losses."""
    from tqdm import tqdm

    from marag.train.experience import batch
    from marag.train.logbook import Logbook
    from marag.train.policy import PolicyValue, attach_lora, hidden_size, save_policy, token_stats

    if not examples:
        raise ValueError("no SFT examples: nothing passed the filters")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(cfg.seed)
    model = backend.module
    if cfg.lora.enabled:
        backbone = attach_lora(model, cfg.lora)
    else:
        for p in model.parameters():
            p.requires_grad_(True)
        backbone = model
    policy = PolicyValue(backbone, hidden_size(model)).to(model.device)
    params = [p for p in backbone.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=cfg.lr)
    eos = min(backend._decoder.eos_ids)
    items = tokenize(examples[:cfg.max_examples] if cfg.max_examples else examples,
                     backend.tokenizer, eos)
    pad = backend._decoder.pad_id
    book = Logbook(out, tensorboard=False)
    rows: list[dict[str, float]] = []
    rng = random.Random(cfg.seed)
    steps = cfg.epochs * ((len(items) + cfg.batch_size - 1) // cfg.batch_size)
    bar = tqdm(total=steps, disable=not progress, desc="sft", unit="step")
    policy.train()
    for epoch in range(cfg.epochs):
        order = list(items)
        rng.shuffle(order)
        for b0 in range(0, len(order), cfg.batch_size):
            chunk = order[b0:b0 + cfg.batch_size]
            n_tok = sum(len(t.response_ids) for t in chunk)
            total = 0.0
            for m0 in range(0, len(chunk), cfg.micro_batch_size):
                micro = chunk[m0:m0 + cfg.micro_batch_size]
                b = batch(micro, pad, model.device)
                logp, _, _ = token_stats(policy, b, [None] * len(micro))
                loss = -(logp * b.mask).sum() / n_tok
                loss.backward()
                total += float(loss.detach())
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            opt.step()
            opt.zero_grad(set_to_none=True)
            row = {"iteration": len(rows) + 1, "epoch": epoch + 1, "loss": total,
                   "examples": len(chunk), "tokens": n_tok}
            rows.append(row)
            book.write(row)
            bar.update(1)
            bar.set_postfix(loss=f"{total:.3f}")
    bar.close()
    policy.eval()
    save_policy(policy, out / "policy")
    backend.weights_updated()
    return rows
