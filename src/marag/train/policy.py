"""The trainable policy: the shared backbone (with LoRA or in full) plus a value head.

``PolicyValue`` is one ``nn.Module`` so that ``accelerate`` can wrap it whole (DDP, FSDP):
its ``forward`` runs the backbone once over left-padded sequences and returns, for the last
``keep`` positions, the logits and the value estimates from the final hidden state. Only
those positions pay for the vocabulary projection, which matters: prompts are hundreds of
tokens, responses a handful.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import torch
from torch import nn

from marag.config import LoraConfig
from marag.train.experience import SharedPrompts

log = logging.getLogger(__name__)

VALUE_HEAD = "value_head.pt"


class PolicyValue(nn.Module):
    """The backbone and a linear value head on its final hidden states.

    ``critic``: ``shared`` trains the value head on the adapter's hidden states, so the value
    loss also moves the adapter (one set of weights for actor and critic); ``detached`` reads
    the same hidden states with the gradient stopped, so the value loss trains the head only
    and the adapter learns from the policy loss alone."""

    def __init__(self, backbone: nn.Module, hidden_size: int, critic: str = "shared") -> None:
        super().__init__()
        if critic not in ("shared", "detached"):
            raise ValueError(f"unknown critic {critic!r}")
        self.backbone = backbone  # a transformers causal LM, possibly peft-wrapped
        self.critic = critic
        self.value_head = nn.Linear(hidden_size, 1)
        nn.init.zeros_(self.value_head.weight)
        nn.init.zeros_(self.value_head.bias)

    def causal_lm(self) -> nn.Module:
        """The transformers model under any peft wrapper (LoRA layers stay injected)."""
        b = self.backbone
        return b.get_base_model() if hasattr(b, "get_base_model") else b

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, keep: int,
                with_values: bool = True, shared: SharedPrompts | None = None
                ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """``input_ids``/``attention_mask`` [B, L], left-padded. Returns ``logits`` [B, keep, V]
        (float32) and ``values`` [B, keep] (None without ``with_values``) at positions
        ``L-keep-1 .. L-2``: the predictions of the last ``keep`` tokens. With ``shared`` the
        rows come from it instead (each distinct prompt run once) and the inputs are unused."""
        hidden = (last_hidden(self.causal_lm(), input_ids, attention_mask, keep)
                  if shared is None else shared_last_hidden(self.causal_lm(), shared, keep))
        logits = lm_logits(self.causal_lm(), hidden)
        if not with_values:
            return logits, None
        h = hidden.detach() if self.critic == "detached" else hidden
        with _no_autocast(h):
            values = self.value_head(h.float()).squeeze(-1)
        return logits, values


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
                       cache=cache, use_cache=True).last_hidden_state
        rows.append(rest)
    hidden = torch.cat(rows, dim=1)  # [B, 1 + R, H], left-aligned per row
    n_rows, width = hidden.shape[0], hidden.shape[1]
    out_h = hidden.new_zeros((n_rows, keep, hidden.shape[-1]))
    for i, n in enumerate(b.response_len):
        take = min(n, width)
        out_h[i, keep - take:] = hidden[i, :take]
    return out_h


def lm_logits(lm: nn.Module, hidden: torch.Tensor) -> torch.Tensor:
    """The vocabulary logits the model itself would give, in float32 even under autocast:
    its output head, then the model's own ``logit_scale`` (Cohere) and
    ``final_logit_softcapping`` (Gemma 2) when its config has them, as its forward does."""
    head = lm.get_output_embeddings()
    with _no_autocast(hidden):
        weight = head.weight
        logits = torch.nn.functional.linear(hidden.float(), weight.float(),
                                            None if head.bias is None else head.bias.float())
    cfg = getattr(lm, "config", None)
    scale = getattr(cfg, "logit_scale", None)
    if scale not in (None, 1, 1.0):
        logits = logits * float(scale)
    cap = getattr(cfg, "final_logit_softcapping", None)
    if cap:
        logits = torch.tanh(logits / cap) * cap
    return logits


def _no_autocast(t: torch.Tensor) -> Any:
    return torch.autocast(t.device.type, enabled=False)


class ReferenceLM(nn.Module):
    """The frozen reference of full fine-tuning: the starting weights' logits, no values (a
    reference needs none, so it builds no value head)."""

    def __init__(self, lm: nn.Module) -> None:
        super().__init__()
        self.lm = lm

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, keep: int,
                with_values: bool = False, shared: SharedPrompts | None = None
                ) -> tuple[torch.Tensor, None]:
        hidden = (last_hidden(self.lm, input_ids, attention_mask, keep) if shared is None
                  else shared_last_hidden(self.lm, shared, keep))
        return lm_logits(self.lm, hidden), None


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
                entropy: bool = False, with_values: bool = True
                ) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
    """Per response token: logprob under the step's own sampling temperature and allowed
    tokens (as the decoder drew it), entropy (optional) and value (optional). ``module`` is
    a ``PolicyValue`` (possibly wrapped by accelerate) or a ``ReferenceLM``; ``batch`` an
    ``experience.Batch``; ``allowed[i]`` a bool vocabulary mask or None. Shapes: [B, T] each.

    Padded positions (left of a shorter response) get logprob 0 and entropy 0: the pad token
    may lie outside the allowed tokens (logprob -inf there), and an infinite value anywhere
    in the graph makes the gradient NaN even where a mask multiplies it away."""
    logits, values = module(batch.input_ids, batch.attention_mask, batch.keep,
                            with_values=with_values, shared=batch.shared)
    logits = logits / batch.temperature[:, None, None]
    if any(m is not None for m in allowed):
        rows = [lg if m is None else lg.masked_fill(~m, float("-inf"))
                for lg, m in zip(logits, allowed)]
        logits = torch.stack(rows)
    pad = batch.mask == 0
    logp_all = torch.log_softmax(logits, dim=-1)
    logp = logp_all.gather(-1, batch.response_ids.unsqueeze(-1)).squeeze(-1)
    logp = logp.masked_fill(pad, 0.0)
    ent = None
    if entropy:
        from marag.train.core import entropy as entropy_of

        ent = entropy_of(logp_all).masked_fill(pad, 0.0)
    return logp, ent, values
