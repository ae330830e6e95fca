"""Traces -> transitions: the unified experience buffer of JADE and MMOA-RAG.

Every LLM step of a trainable role becomes one :class:`Transition` (its prompt and response
token ids, how it was sampled, its reward); the steps of all roles of all traces of an
iteration sit in one buffer and are shuffled into mixed mini-batches. Steps of frozen roles
never enter it. ``batch`` pads a group of transitions for :class:`~marag.train.policy.PolicyValue`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import torch

from marag.types import Trace


class ExperienceError(ValueError):
    """A trace cannot be trained on (e.g. a trainable step without token ids)."""


@dataclass
class Transition:
    trace: int  # index of the trace in the iteration's rollout
    group: int  # index of the question (the samples of one question share it)
    order: int  # position among the trace's trainable steps
    role: str
    prompt_ids: list[int]
    response_ids: list[int]
    rollout_logprobs: list[float]
    temperature: float
    allowed_text: tuple[str, ...] = ()
    reward: float = 0.0  # the step's scalar reward, received after its last token
    # filled by the trainer (one float per response token)
    old_logprobs: torch.Tensor | None = None
    ref_logprobs: torch.Tensor | None = None
    values: torch.Tensor | None = None
    advantages: torch.Tensor | None = None
    returns: torch.Tensor | None = None
    # where the value loss applies (None: every response token; the turn-level estimators
    # train the one value per step, read at its first response position)
    value_mask: torch.Tensor | None = None
    # 1 on the response tokens the model wrote, 0 on observations inside the response (a
    # multi-turn trajectory as one sequence: ``train.trajectory``); None: every token trains
    loss_mask: list[int] | None = None
    step: int = -1  # index of the step in its trace (the last one, for a trajectory)

    @property
    def length(self) -> int:
        """Tokens the forward pass runs over: prompt and response."""
        return len(self.prompt_ids) + len(self.response_ids)

    @property
    def trained_tokens(self) -> int:
        """Response tokens that take part in the loss."""
        return len(self.response_ids) if self.loss_mask is None else sum(self.loss_mask)

    def trained_mask(self) -> torch.Tensor:
        """Bool [len(response)]: True on the tokens that train (all but observations)."""
        if self.loss_mask is None:
            return torch.ones(len(self.response_ids), dtype=torch.bool)
        return torch.tensor(self.loss_mask, dtype=torch.bool)


def collect(traces: Sequence[Trace], rewards: Sequence[Sequence[float | None]],
            roles: Iterable[str]) -> list[Transition]:
    """The transitions of ``roles``' steps in ``traces`` (``rewards[i]`` aligned with
    ``traces[i].steps``). Questions are grouped by ``Trace.id``.

    The reward of a step that is not trained (a frozen role's, e.g. the final F1 that JADE's
    reward puts on AG when only the planner trains) is added to the latest trained step
    before it in the same trace: the decisions that led to it get the credit instead of the
    reward vanishing. A reward before any trained step has nobody to go to and is dropped."""
    train_roles = set(roles)
    groups: dict[str, int] = {}
    out: list[Transition] = []
    for ti, (trace, step_rewards) in enumerate(zip(traces, rewards, strict=True)):
        if len(step_rewards) != len(trace.steps):
            raise ExperienceError(f"trace {trace.id}: {len(step_rewards)} rewards for "
                                  f"{len(trace.steps)} steps")
        group = groups.setdefault(trace.id, len(groups))
        order = 0
        last: Transition | None = None
        for si, (step, reward) in enumerate(zip(trace.steps, step_rewards)):
            if not step.is_llm or step.role not in train_roles:
                if reward and last is not None:
                    last.reward += float(reward)
                continue
            if not step.token_ids or step.prompt_token_ids is None or step.logprobs is None:
                raise ExperienceError(
                    f"trace {trace.id}: step {step.role} has no token ids/logprobs; trainable "
                    f"roles must run on the local hf policy with logprobs on (backend "
                    f"{step.backend!r})")
            sampling = step.sampling or {}
            temp = float(sampling.get("temperature", 0.0) or 0.0)
            last = Transition(
                trace=ti, group=group, order=order, role=step.role,
                prompt_ids=list(step.prompt_token_ids), response_ids=list(step.token_ids),
                rollout_logprobs=list(step.logprobs),
                # the decoder's logprobs are under the sampling temperature (1 when greedy)
                temperature=temp if temp > 0 else 1.0,
                allowed_text=tuple(sampling.get("allowed_text") or ()),
                reward=float(reward or 0.0), step=si,
            )
            out.append(last)
            order += 1
    return out


def by_trace(transitions: Sequence[Transition]) -> list[list[Transition]]:
    """Transitions grouped per trace, each group in step order."""
    groups: dict[int, list[Transition]] = {}
    for t in transitions:
        groups.setdefault(t.trace, []).append(t)
    return [sorted(g, key=lambda t: t.order) for _, g in sorted(groups.items())]


@dataclass
class SharedPrompts:
    """A batch whose rows share prompts, laid out so each distinct prompt runs once: the
    samples of one question share the planner's prompt, and the executor's too when their
    inputs agree (the same retrieved documents). ``prompt_ids``/``prompt_mask`` [U, P]
    left-padded distinct prompts; ``row_prompt`` [B] each row's prompt; ``response_ids``/
    ``response_mask`` [B, R] each row's response without its last token (whose hidden state
    predicts nothing), right-padded; ``response_len`` [B] the full response lengths."""

    prompt_ids: torch.Tensor
    prompt_mask: torch.Tensor
    row_prompt: torch.Tensor
    response_ids: torch.Tensor
    response_mask: torch.Tensor
    response_len: list[int]


@dataclass
class Batch:
    input_ids: torch.Tensor  # [B, L] left-padded prompt + response (empty with ``shared``)
    attention_mask: torch.Tensor  # [B, L]
    response_ids: torch.Tensor  # [B, T] right-aligned
    mask: torch.Tensor  # [B, T] float, 1 on response tokens
    temperature: torch.Tensor  # [B]
    keep: int  # T: positions whose logits are needed
    shared: SharedPrompts | None = None  # the rows laid out by distinct prompt instead


def padded(seqs: Sequence[Sequence[int]], width: int, pad_id: int,
           align_right: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """``(ids, mask)`` [len(seqs), width]: each sequence placed against the right edge (left
    padding) or the left edge, ``pad_id`` and mask 0 elsewhere."""
    ids = torch.full((len(seqs), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(seqs), width), dtype=torch.long)
    for i, seq in enumerate(seqs):
        if seq:
            cols = slice(width - len(seq), width) if align_right else slice(0, len(seq))
            ids[i, cols] = torch.tensor(seq)
            mask[i, cols] = 1
    return ids, mask


def batch(items: Sequence[Transition], pad_id: int, device: torch.device | str = "cpu",
          multiple: int = 1, *, prompts: bool = True) -> Batch:
    """Left-pad ``items`` to the longest, rounded up to ``multiple`` columns (CPU bf16
    kernels run faster on aligned widths; padding is masked out). ``prompts`` False leaves
    the full sequences out (``input_ids`` [B, 0]): the responses only."""
    seqs = [t.prompt_ids + t.response_ids for t in items] if prompts else [[] for _ in items]
    width = -(-max(len(q) for q in seqs) // multiple) * multiple
    keep = max(len(t.response_ids) for t in items)
    ids, attn = padded(seqs, width, pad_id)
    resp, mask = padded([t.response_ids for t in items], keep, pad_id)
    for i, t in enumerate(items):
        if t.loss_mask is not None:  # observations inside the response train nothing
            mask[i, keep - len(t.loss_mask):] = torch.tensor(t.loss_mask, dtype=mask.dtype)
    temps = torch.tensor([t.temperature for t in items], dtype=torch.float32)
    return Batch(ids.to(device), attn.to(device), resp.to(device), mask.float().to(device),
                 temps.to(device), keep)


def shared_batch(items: Sequence[Transition], pad_id: int, device: torch.device | str = "cpu",
                 multiple: int = 1) -> Batch:
    """``batch`` for the shared-prompt forward (``policy.shared_last_hidden``): each distinct
    prompt once, left-padded to a ``multiple`` of columns, and the responses apart."""
    index: dict[tuple[int, ...], int] = {}
    row_prompt = [index.setdefault(tuple(t.prompt_ids), len(index)) for t in items]
    prompts = list(index)
    width = -(-max(len(p) for p in prompts) // multiple) * multiple
    p_ids, p_mask = padded(prompts, width, pad_id)
    # each response without its last token (whose state predicts nothing), left-aligned
    rest = [t.response_ids[:-1] for t in items]
    r_ids, r_mask = padded(rest, max(len(r) for r in rest), pad_id, align_right=False)
    plain = batch(items, pad_id, device, multiple, prompts=False)
    shared = SharedPrompts(p_ids.to(device), p_mask.to(device),
                           torch.tensor(row_prompt, dtype=torch.long, device=device),
                           r_ids.to(device), r_mask.to(device),
                           [len(t.response_ids) for t in items])
    return Batch(plain.input_ids, plain.attention_mask, plain.response_ids, plain.mask,
                 plain.temperature, plain.keep, shared)


def right_aligned(rows: Sequence[torch.Tensor], width: int) -> torch.Tensor:
    """Per-transition 1-D tensors placed right-aligned in a zero ``[len(rows), width]``."""
    out = torch.zeros((len(rows), width))
    for i, r in enumerate(rows):
        if r.numel():
            out[i, width - r.numel():] = r
    return out
