"""The trainable policy: the shared backbone (with LoRA or in full) plus a value head.

``PolicyValue`` is one ``nn.Module`` so that ``accelerate`` can wrap it whole (DDP, FSDP):
its ``forward`` runs the backbone once over left-padded sequences and returns, for the
response tokens among the last ``keep`` positions, their log-probabilities (and entropies)
and the value estimates from the final hidden state. Only those positions pay for the
vocabulary projection, which matters: prompts are hundreds of tokens, responses a handful.

The vocabulary projection runs ``score_chunk`` positions at a time, in the output head's own
dtype (no float32 copy of the head), each chunk's logits upcast to float32 for the softmax;
with gradients on and more than one chunk, each chunk is recomputed in the backward pass
instead of kept, so a micro-batch holds one chunk's float32 logits, not ``tokens x vocab``
of them (at Qwen2.5's 152k vocabulary: 0.6 MB a token and tensor).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

from marag.config import LoraConfig
from marag.llm.cache_kwarg import cache_kwarg
from marag.train.experience import SharedPrompts

log = logging.getLogger(__name__)

VALUE_HEAD = "value_head.pt"

# positions whose vocabulary logits exist at once when scoring: each float32 [chunk, vocab]
# tensor is 311 MB at Qwen2.5's 152k vocabulary (see docs/training.md, "Memory")
SCORE_CHUNK = 512


@dataclass
class Targets:
    """What a forward pass scores, per response token: ``ids`` [B, T] the sampled tokens
    (right-aligned), ``pad`` [B, T] True left of a shorter response, each row's sampling
    ``temperature`` [B] and allowed tokens (a bool vocabulary mask, or None for all), whether
    to compute the ``entropy``, and ``chunk`` positions at a time (None: the module's own
    ``score_chunk``)."""

    ids: torch.Tensor
    pad: torch.Tensor
    temperature: torch.Tensor
    allowed: list[torch.Tensor | None]
    entropy: bool = False
    chunk: int | None = None


class Scores(NamedTuple):
    """Per response token [B, T], float32: log-probability of the sampled token, entropy
    (None unless asked for); 0 at padded positions."""

    logp: torch.Tensor
    entropy: torch.Tensor | None


class PolicyValue(nn.Module):
    """The backbone and a linear value head on its final hidden states.

    ``critic``: ``shared`` trains the value head on the adapter's hidden states, so the value
    loss also moves the adapter (one set of weights for actor and critic); ``detached`` reads
    the same hidden states with the gradient stopped, so the value loss trains the head only
    and the adapter learns from the policy loss alone."""

    def __init__(self, backbone: nn.Module, hidden_size: int, critic: str = "shared",
                 score_chunk: int = SCORE_CHUNK) -> None:
        super().__init__()
        if critic not in ("shared", "detached"):
            raise ValueError(f"unknown critic {critic!r}")
        if score_chunk < 1:
            raise ValueError(f"score_chunk {score_chunk} < 1")
        self.backbone = backbone  # a transformers causal LM, possibly peft-wrapped
        self.critic = critic
        self.score_chunk = score_chunk
        self.value_head = nn.Linear(hidden_size, 1)
        nn.init.zeros_(self.value_head.weight)
        nn.init.zeros_(self.value_head.bias)

    def causal_lm(self) -> nn.Module:
        """The transformers model under any peft wrapper (LoRA layers stay injected)."""
        b = self.backbone
        return b.get_base_model() if hasattr(b, "get_base_model") else b

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, keep: int,
                with_values: bool = True, shared: SharedPrompts | None = None,
                targets: Targets | None = None
                ) -> tuple[Scores | torch.Tensor, torch.Tensor | None]:
        """``input_ids``/``attention_mask`` [B, L], left-padded. Returns the ``Scores`` of
        ``targets`` (the last ``keep`` tokens, [B, keep]) and ``values`` [B, keep] (None
        without ``with_values``) at positions ``L-keep-1 .. L-2``, the ones predicting them.
        Without ``targets``, the float32 logits [B, keep, V] over the whole vocabulary in
        place of the scores (memory: ``keep`` x V x 4 bytes a row). With ``shared`` the rows
        come from it instead (each distinct prompt run once) and the inputs are unused."""
        hidden = (last_hidden(self.causal_lm(), input_ids, attention_mask, keep)
                  if shared is None else shared_last_hidden(self.causal_lm(), shared, keep))
        scores = (lm_logits(self.causal_lm(), hidden) if targets is None else
                  token_scores(self.causal_lm(), hidden, targets,
                               targets.chunk or self.score_chunk))
        if not with_values:
            return scores, None
        h = hidden.detach() if self.critic == "detached" else hidden
        with _no_autocast(h):
            values = self.value_head(h.float()).squeeze(-1)
        return scores, values


def last_hidden(lm: nn.Module, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                keep: int) -> torch.Tensor:
    """The decoder's final hidden states [B, keep, H] at the positions that predict the last
    ``keep`` tokens of left-padded sequences."""
    position_ids = (attention_mask.cumsum(-1) - 1).clamp(min=0)
    out = lm.get_decoder()(input_ids=input_ids, attention_mask=attention_mask,
                           position_ids=position_ids, use_cache=False)
    return out.last_hidden_state[:, -keep - 1:-1]


def shared_last_hidden(lm: nn.Module, b: SharedPrompts, keep: int) -> torch.Tensor:
    """What ``last_hidden`` returns for the rows of ``b`` (right-aligned in [B, keep, H]; the
    slots left of a shorter response are zeros, where ``last_hidden`` has prompt states that
    every caller masks), with each distinct prompt run once: the prompts' keys and values
    are computed once and indexed per row (the gradient of every row flows back into them),
    then the responses run on top of them."""
    decoder = lm.get_decoder()
    prompt_pos = (b.prompt_mask.cumsum(-1) - 1).clamp(min=0)
    out = decoder(input_ids=b.prompt_ids, attention_mask=b.prompt_mask, position_ids=prompt_pos,
                  use_cache=True)
    first = out.last_hidden_state[:, -1][b.row_prompt]  # [B, H]: predicts response token 0
    rows = [first[:, None]]
    if b.response_ids.shape[1]:
        cache = out.cache if hasattr(out, "cache") else out.past_key_values
        cache.reorder_cache(b.row_prompt)
        start = b.prompt_mask.sum(-1)[b.row_prompt]  # each row's prompt length
        pos = start[:, None] + torch.arange(b.response_ids.shape[1], device=start.device)
        mask = torch.cat([b.prompt_mask[b.row_prompt], b.response_mask], dim=1)
        rest = decoder(input_ids=b.response_ids, attention_mask=mask, position_ids=pos,
                       use_cache=True, **{cache_kwarg(decoder): cache}).last_hidden_state
        rows.append(rest)
    hidden = torch.cat(rows, dim=1)  # [B, 1 + R, H], left-aligned per row
    n_rows, width = hidden.shape[0], hidden.shape[1]
    out_h = hidden.new_zeros((n_rows, keep, hidden.shape[-1]))
    for i, n in enumerate(b.response_len):
        take = min(n, width)
        out_h[i, keep - take:] = hidden[i, :take]
    return out_h


def lm_logits(lm: nn.Module, hidden: torch.Tensor) -> torch.Tensor:
    """The vocabulary logits the model itself would give, as float32: its output head in the
    head's own dtype (autocast off: a float32 head computes in float32, a bfloat16 one in
    bfloat16 as the model's own forward and the decoder do, and neither is copied), upcast,
    then the model's own ``logit_scale`` (Cohere) and ``final_logit_softcapping`` (Gemma 2)
    when its config has them, as its forward does. ``hidden`` [..., H]: callers pass a chunk
    of positions at a time (``token_scores``)."""
    head = lm.get_output_embeddings()
    with _no_autocast(hidden):
        weight = head.weight
        logits = torch.nn.functional.linear(hidden.to(weight.dtype), weight, head.bias).float()
    cfg = getattr(lm, "config", None)
    scale = getattr(cfg, "logit_scale", None)
    if scale not in (None, 1, 1.0):
        logits = logits * float(scale)
    cap = getattr(cfg, "final_logit_softcapping", None)
    if cap:
        logits = torch.tanh(logits / cap) * cap
    return logits


def token_scores(lm: nn.Module, hidden: torch.Tensor, t: Targets, chunk: int) -> Scores:
    """``Scores`` of ``t`` from the final hidden states [B, T, H] that predict its tokens:
    log-probabilities under each row's temperature and allowed tokens, as the decoder drew
    them, and entropies. Only the response positions are scored, ``chunk`` at a time;
    with gradients on and more than one chunk each chunk is recomputed in the backward pass
    (``torch.utils.checkpoint``) so that only its hidden states are kept."""
    n_rows, width = t.ids.shape
    rows, cols = (~t.pad).nonzero(as_tuple=True)
    if rows.numel() == 0:  # nothing to score (a dummy pass): one position keeps the head in
        rows, cols = rows.new_zeros(1), cols.new_full((1,), width - 1)  # the graph; zeroed
    h, ids = hidden[rows, cols], t.ids[rows, cols]
    temps = t.temperature.to(device=hidden.device, dtype=torch.float32)[rows]
    masks = None
    if any(m is not None for m in t.allowed):
        size = next(m for m in t.allowed if m is not None).shape[-1]
        full = torch.ones(size, dtype=torch.bool, device=hidden.device)
        masks = torch.stack([full if m is None else m.to(hidden.device) for m in t.allowed])

    def score(h: torch.Tensor, ids: torch.Tensor, temps: torch.Tensor,
              allow: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor | None]:
        # a fresh float32 tensor, divided and masked in place: one [chunk, V] tensor, not three
        logits = lm_logits(lm, h).div_(temps[:, None])
        if allow is not None:
            logits.masked_fill_(~allow, float("-inf"))
        logp_all = torch.log_softmax(logits, dim=-1)
        logp = logp_all.gather(-1, ids[:, None]).squeeze(-1)
        if not t.entropy:
            return logp, None
        from marag.train.core import entropy as entropy_of

        return logp, entropy_of(logp_all)

    n = h.shape[0]
    recompute = n > chunk and torch.is_grad_enabled() and h.requires_grad
    logps, ents = [], []
    for s in range(0, n, chunk):
        part = slice(s, s + chunk)
        args = (h[part], ids[part], temps[part], None if masks is None else masks[rows[part]])
        if recompute:
            logp, ent = checkpoint(score, *args, use_reentrant=False, preserve_rng_state=False)
        else:
            logp, ent = score(*args)
        logps.append(logp)
        ents.append(ent)

    def placed(values: list[torch.Tensor]) -> torch.Tensor:
        # padded positions are exact zeros (the pad token may lie outside the allowed
        # tokens: an infinite value anywhere in the graph makes the gradient NaN)
        out = hidden.new_zeros((n_rows, width), dtype=torch.float32)
        return out.index_put((rows, cols), torch.cat(values)).masked_fill(t.pad, 0.0)

    return Scores(placed(logps), placed(ents) if t.entropy else None)


def _no_autocast(t: torch.Tensor) -> Any:
    return torch.autocast(t.device.type, enabled=False)


class ReferenceLM(nn.Module):
    """The frozen reference of full fine-tuning: the starting weights' logits, no values (a
    reference needs none, so it builds no value head)."""

    def __init__(self, lm: nn.Module, score_chunk: int = SCORE_CHUNK) -> None:
        super().__init__()
        self.lm = lm
        self.score_chunk = score_chunk

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, keep: int,
                with_values: bool = False, shared: SharedPrompts | None = None,
                targets: Targets | None = None) -> tuple[Scores | torch.Tensor, None]:
        hidden = (last_hidden(self.lm, input_ids, attention_mask, keep) if shared is None
                  else shared_last_hidden(self.lm, shared, keep))
        if targets is None:
            return lm_logits(self.lm, hidden), None
        return token_scores(self.lm, hidden, targets, targets.chunk or self.score_chunk), None


def hidden_size(model: nn.Module) -> int:
    cfg = model.config
    size = getattr(cfg, "hidden_size", None) or getattr(cfg, "n_embd", None)
    if not size:
        raise ValueError(f"cannot tell the hidden size of {type(model).__name__}")
    return int(size)


def attach_lora(model: nn.Module, cfg: LoraConfig) -> nn.Module:
    """Wrap ``model`` with a new LoRA adapter.

    peft injects the adapter layers into ``model`` in place, so a backend already decoding
    with ``model`` samples from the adapted weights from then on.
    """
    from peft import LoraConfig as PeftLora
    from peft import get_peft_model

    for p in model.parameters():
        p.requires_grad_(False)
    present = {name.rsplit(".", 1)[-1] for name, _ in model.named_modules()}
    targets = [t for t in cfg.target_modules if t in present]
    if not targets:
        raise ValueError(f"train.lora.target_modules {cfg.target_modules} match no module of "
                         f"{type(model).__name__}")
    peft_cfg = PeftLora(r=cfg.r, lora_alpha=cfg.alpha, lora_dropout=cfg.dropout,
                        target_modules=targets, bias="none", task_type="CAUSAL_LM")
    return get_peft_model(model, peft_cfg)


def build_policy(model: nn.Module, lora: LoraConfig, *, critic: str = "shared",
                 reference: bool = False, gradient_checkpointing: bool = False
                 ) -> tuple[PolicyValue, nn.Module | None]:
    """The trained policy over ``model`` (a backend's module, changed in place), as ``marag
    train`` and ``marag sft`` both build it: a new LoRA adapter when ``lora.enabled`` (every
    base weight frozen), else every weight trainable; ``gradient_checkpointing`` on the
    decoder layers; a value head (``critic``) on the device of ``model``.

    ``reference``: also return a frozen copy of the starting weights for full fine-tuning
    (the KL reference; taken before anything changes). LoRA needs none (the reference is the
    backbone with the adapter off), so the second value is None then, and without
    ``reference``."""
    import copy

    frozen = None
    if reference and not lora.enabled:
        frozen = copy.deepcopy(model).eval()
        for p in frozen.parameters():
            p.requires_grad_(False)
    if lora.enabled:
        backbone = attach_lora(model, lora)
    else:
        for p in model.parameters():
            p.requires_grad_(True)
        backbone = model
    if gradient_checkpointing:
        enable_gradient_checkpointing(model)
    policy = PolicyValue(backbone, hidden_size(model), critic=critic).to(model.device)
    return policy, frozen


def store_frozen_linears(model: nn.Module, dtype: torch.dtype) -> int:
    """Keep the frozen weights and biases of ``model``'s linear layers (LoRA's base layers)
    in ``dtype``, the autocast dtype every pass computes them in. Autocast caches its casts
    only of tensors that require grad, so a frozen float32 weight is cast again at every
    call: each decode step and each forward re-reads the whole backbone to cast it. Stored in
    the compute dtype, the results are the same (the same cast, done once). The output head
    stays as it is (``lm_logits`` computes the logits in float32 from it), and so do the
    input embeddings, which a tied head shares, also when LoRA wraps the head. Returns the
    number of parameters cast."""
    keep: set[int] = set()
    for get in ("get_output_embeddings", "get_input_embeddings"):
        part = getattr(model, get, lambda: None)()
        if part is not None:
            keep.update(id(p) for p in part.parameters())
    n = 0
    for module in model.modules():
        if not isinstance(module, nn.Linear):
            continue
        for p in module.parameters(recurse=False):
            if id(p) not in keep and not p.requires_grad and p.dtype != dtype \
                    and p.is_floating_point():
                p.data = p.data.to(dtype)
                n += p.numel()
    return n


def trainable_parameters(module: nn.Module) -> list[nn.Parameter]:
    return [p for p in module.parameters() if p.requires_grad]


def save_policy(policy: PolicyValue, out: str | Path,
                state: dict[str, torch.Tensor] | None = None) -> None:
    """The adapter (peft layout, loadable by ``--adapter``) or the full model, plus the value
    head, into ``out``. ``state`` (every trainable tensor by name, whole) replaces the
    module's own tensors: under FSDP those are shards, gathered by ``full_trainable``."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    save_backbone(policy, out, state)
    if state is None:
        head = policy.value_head.state_dict()
    else:
        head = {k.removeprefix("value_head."): v for k, v in state.items()
                if k.startswith("value_head.")}
    torch.save(head, out / VALUE_HEAD)


def save_backbone(policy: PolicyValue, out: str | Path,
                  state: dict[str, torch.Tensor] | None = None) -> None:
    """The adapter in peft's layout, or the full model (see ``save_policy`` for ``state``)."""
    backbone = policy.backbone
    kwargs: dict[str, Any] = {}
    if state is not None:
        kwargs["state_dict"] = {k.removeprefix("backbone."): v for k, v in state.items()
                                if k.startswith("backbone.")}
    if hasattr(backbone, "peft_config"):
        backbone.save_pretrained(str(out), **kwargs)
    else:
        backbone.save_pretrained(str(out), safe_serialization=True, **kwargs)


def full_trainable(policy: nn.Module) -> dict[str, torch.Tensor]:
    """Every trainable tensor of ``policy`` by name, whole and on the CPU. Under FSDP a
    parameter is a ``DTensor`` shard and ``full_tensor`` all-gathers it, so every process
    must call this, in step."""
    out = {}
    for name, p in policy.named_parameters():
        if p.requires_grad:
            whole = p.full_tensor() if hasattr(p, "full_tensor") else p
            out[name] = whole.detach().cpu().clone()
    return out


def load_value_head(policy: PolicyValue, src: str | Path) -> None:
    path = Path(src) / VALUE_HEAD
    if path.is_file():
        policy.value_head.load_state_dict(torch.load(path, map_location="cpu"))


def token_stats(module: nn.Module, batch: Any, allowed: list[torch.Tensor | None],
                entropy: bool = False, with_values: bool = True, chunk: int | None = None
                ) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
    """Per response token: logprob under the step's own sampling temperature and allowed
    tokens (as the decoder drew it), entropy (optional) and value (optional). ``module`` is
    a ``PolicyValue`` (possibly wrapped by accelerate) or a ``ReferenceLM``; ``batch`` an
    ``experience.Batch``; ``allowed[i]`` a bool vocabulary mask or None; ``chunk`` positions
    whose logits exist at once (None: the module's ``score_chunk``). Shapes: [B, T] each.

    Padded positions (left of a shorter response) get logprob 0 and entropy 0: the pad token
    may lie outside the allowed tokens (logprob -inf there), and an infinite value anywhere
    in the graph makes the gradient NaN even where a mask multiplies it away."""
    targets = Targets(ids=batch.response_ids, pad=batch.mask == 0,
                      temperature=batch.temperature, allowed=list(allowed), entropy=entropy,
                      chunk=chunk)
    scores, values = module(batch.input_ids, batch.attention_mask, batch.keep,
                            with_values=with_values, shared=batch.shared, targets=targets)
    return scores.logp, scores.entropy, values


def enable_gradient_checkpointing(model: nn.Module) -> None:
    """``train.gradient_checkpointing``: each decoder layer of ``model`` (the transformers
    model under any peft wrapper) keeps only its input in the forward pass and runs again in
    the backward one (non-reentrant ``torch.utils.checkpoint``): the activations of one
    layer instead of all, for about one more forward pass of compute. Only passes that
    build a graph (updates) checkpoint; scoring and decoding run as before. The input
    embeddings' output is made to require grad (transformers does it itself from 5.x), as
    LoRA over a frozen embedding needs under reentrant checkpointing (harmless here)."""
    kwargs = {"use_reentrant": False}
    if hasattr(model, "activation_checkpointing_enable"):  # transformers 5
        model.activation_checkpointing_enable(activation_checkpointing_kwargs=kwargs)
    else:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)
        model.enable_input_require_grads()
