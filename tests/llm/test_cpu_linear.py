"""FastLinear: same products as nn.Linear, only computed as (W @ x.T).T where that is faster."""

import copy
import io

import pytest
import torch
from torch import nn

from marag.llm.cpu_linear import FastLinear, linear_wt, use_fast_linears
from marag.llm.tiny import build_tiny_model


@pytest.mark.parametrize("shape", [(1, 16), (3, 16), (2, 5, 16), (40, 16)])
@pytest.mark.parametrize("bias", [True, False])
def test_linear_wt_equals_f_linear(shape, bias):
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(*shape, generator=gen)
    w = torch.randn(24, 16, generator=gen)
    b = torch.randn(24, generator=gen) if bias else None
    out = linear_wt(x, w, b)
    assert out.shape == (*shape[:-1], 24) and out.is_contiguous()
    assert torch.allclose(out, nn.functional.linear(x, w, b), atol=1e-5)


def test_model_outputs_are_unchanged_and_training_still_works():
    model, _ = build_tiny_model(seed=3)
    reference = copy.deepcopy(model)
    n = use_fast_linears(model)
    # 2 layers x (q, k, v, o, gate, up, down) + the output projection
    assert n == 15 and type(model.lm_head) is FastLinear
    assert isinstance(model.lm_head, nn.Linear)
    ids = torch.tensor([[5, 9, 13, 2], [7, 7, 8, 30]])
    long = torch.arange(3, 153)[None, :]  # 150 token rows: over MAX_ROWS, the plain path
    with torch.inference_mode():
        for batch in (ids[:1], ids, ids[:, -1:], long):
            assert torch.allclose(model(batch).logits, reference(batch).logits, atol=1e-5)
    # with autograd on, the plain nn.Linear path runs and gradients flow
    loss = model(ids, labels=ids).loss
    loss.backward()
    assert model.lm_head.weight.grad is not None
    assert model.model.layers[0].mlp.up_proj.weight.grad.abs().sum() > 0


def test_switched_model_saves_and_loads_like_the_original():
    model, _ = build_tiny_model(seed=4)
    use_fast_linears(model)
    buf = io.BytesIO()
    torch.save(model, buf)
    buf.seek(0)
    loaded = torch.load(buf, weights_only=False)
    assert type(loaded.lm_head) is FastLinear
    assert set(model.state_dict()) == set(loaded.state_dict())


def test_quantised_subclasses_are_left_alone():
    class QuantLinear(nn.Linear):
        pass

    holder = nn.Sequential(nn.Linear(4, 4), QuantLinear(4, 4))
    assert use_fast_linears(holder) == 1
    assert type(holder[0]) is FastLinear and type(holder[1]) is QuantLinear
