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

log = logging.getLogger(__name__)

VALUE_HEAD = "value_head.pt"


class PolicyValue(nn.Module):
    def __init__(self, backbone: nn.Module, hidden_size: int) -> None:
        super().__init__()
        self.backbone = backbone  # a transformers causal LM, possibly peft-wrapped
        self.value_head = nn.Linear(hidden_size, 1)
        nn.init.zeros_(self.value_head.weight)
        nn.init.zeros_(self.value_head.bias)

    def causal_lm(self) -> nn.Module:
        """The transformers model under any peft wrapper (LoRA layers stay injected)."""
        b = self.backbone
        return b.get_base_model() if hasattr(b, "get_base_model") else b

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, keep: int
                ) -> tuple[torch.Tensor, torch.Tensor]:
        """``input_ids``/``attention_mask`` [B, L], left-padded. Returns ``logits`` [B, keep, V]
        (float32) and ``values`` [B, keep] at positions ``L-keep-1 .. L-2``: the predictions of
        the last ``keep`` tokens."""
        lm = self.causal_lm()
        position_ids = (attention_mask.cumsum(-1) - 1).clamp(min=0)
        out = lm.get_decoder()(input_ids=input_ids, attention_mask=attention_mask,
                               position_ids=position_ids, use_cache=False)
        hidden = out.last_hidden_state[:, -keep - 1:-1]
        logits = lm.get_output_embeddings()(hidden).float()
        values = self.value_head(hidden.float()).squeeze(-1)
        return logits, values


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
                entropy: bool = False
                ) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor]:
    """Per response token: logprob under the step's own sampling temperature and allowed
    tokens (as the decoder drew it), entropy (optional) and value. ``module`` is a
    ``PolicyValue`` (possibly wrapped by accelerate); ``batch`` an ``experience.Batch``;
    ``allowed[i]`` a bool vocabulary mask or None. Shapes: [B, T] each."""
    logits, values = module(batch.input_ids, batch.attention_mask, batch.keep)
    logits = logits / batch.temperature[:, None, None]
    if any(m is not None for m in allowed):
        rows = [lg if m is None else lg.masked_fill(~m, float("-inf"))
                for lg, m in zip(logits, allowed)]
        logits = torch.stack(rows)
    logp_all = torch.log_softmax(logits, dim=-1)
    logp = logp_all.gather(-1, batch.response_ids.unsqueeze(-1)).squeeze(-1)
    ent = torch.special.entr(logp_all.exp()).sum(-1) if entropy else None
    return logp, ent, values
