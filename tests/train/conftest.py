"""Training tests run the tiny model: one torch thread each (extra threads only spin against
each other on its microsecond matmuls), restored afterwards."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture(autouse=True)
def _one_torch_thread() -> Iterator[None]:
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def tiny_policy(*, lora: bool = True, dtype: Any = None, checkpointing: bool = False
                ) -> tuple[Any, Any, Any]:
    """``(policy, model, tokenizer)``: a value-headed policy over the tiny random model (LoRA
    r 4 on q/v, or every weight trainable), its adapter and value head drawn away from zero so
    logprobs and values are not trivial."""
    import torch

    from marag.config import LoraConfig
    from marag.llm.tiny import build_tiny_model
    from marag.train.policy import PolicyValue, attach_lora, enable_gradient_checkpointing

    model, tok = build_tiny_model(seed=0)
    if dtype is not None:
        model.to(dtype)
    torch.manual_seed(0)
    if lora:
        backbone = attach_lora(model, LoraConfig(r=4, target_modules=["q_proj", "v_proj"]))
    else:
        backbone = model
        for p in model.parameters():
            p.requires_grad_(True)
    if checkpointing:
        enable_gradient_checkpointing(model)
    policy = PolicyValue(backbone, model.config.hidden_size)
    with torch.no_grad():
        for name, p in policy.named_parameters():
            if "lora_B" in name or name.startswith("value_head"):
                p.normal_(0, 0.05)
    return policy, model, tok
