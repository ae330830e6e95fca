"""train.gradient_checkpointing: the decoder layers run again in the backward pass instead of
keeping their activations, with the same losses and gradients."""

from __future__ import annotations

import pytest
import torch
from tests.train.conftest import tiny_policy
from tests.train.test_trainer import make

from marag.train.experience import Transition, batch
from marag.train.policy import token_stats


def _policy(lora: bool, checkpointing: bool):
    return tiny_policy(lora=lora, checkpointing=checkpointing)


def _batch(tok):
    g = torch.Generator().manual_seed(4)
    items = [Transition(trace=i, group=0, order=0, role="AG",
                        prompt_ids=torch.randint(40, 300, (6 + 2 * i,), generator=g).tolist(),
                        response_ids=torch.randint(10, 40, (1 + i,), generator=g).tolist(),
                        rollout_logprobs=[0.0] * (1 + i), temperature=0.9) for i in range(4)]
    return batch(items, tok.pad_token_id)


@pytest.mark.parametrize("lora", [True, False])
def test_a_checkpointed_step_has_the_same_loss_and_gradients(lora):
    results = []
    for checkpointing in (False, True):
        policy, model, tok = _policy(lora, checkpointing)
        replays = []
        for layer in model.model.layers:
            if checkpointing:
                assert layer.gradient_checkpointing
                run = layer._gradient_checkpointing_func

                def counted(*args, run=run, replays=replays, **kwargs):
                    replays.append(1)
                    return run(*args, **kwargs)

                layer._gradient_checkpointing_func = counted
        policy.train()
        b = _batch(tok)
        logp, ent, values = token_stats(policy, b, [None] * 4, entropy=True, chunk=3)
        m = b.mask
        loss = -(logp * m).sum() - 0.01 * (ent * m).sum() + ((values - 1) ** 2 * m).sum()
        loss.backward()
        assert len(replays) == (len(model.model.layers) if checkpointing else 0)
        results.append((float(loss), {n: p.grad.clone() for n, p in policy.named_parameters()
                                      if p.grad is not None}))
        # scoring and decoding (no graph) run the layers as they are
        policy.eval()
        with torch.no_grad():
            token_stats(policy, b, [None] * 4)
        assert len(replays) == (len(model.model.layers) if checkpointing else 0)
    (loss_off, off), (loss_on, on) = results
    assert loss_on == pytest.approx(loss_off, rel=1e-6)
    assert off.keys() == on.keys() and len(off) > 2
    for name, g in off.items():
        torch.testing.assert_close(on[name], g, rtol=1e-5, atol=1e-6)


def test_a_training_iteration_with_checkpointing_matches_one_without(tmp_path):
    runs = []
    for on in (False, True):
        tr = make(tmp_path / str(on), "train.iterations=1", "train.dtype=float32",
                  f"train.gradient_checkpointing={str(on).lower()}")
        layers = tr.policy.causal_lm().model.layers
        assert all(layer.gradient_checkpointing == on for layer in layers)
        row = tr.run()[0]
        runs.append((row, {n: p.detach().clone() for n, p in tr.policy.named_parameters()
                           if p.requires_grad}))
    (row_off, off), (row_on, on) = runs
    for key in ("pg_loss", "vf_loss", "entropy", "grad_norm"):
        assert row_on[key] == pytest.approx(row_off[key], rel=1e-5, abs=1e-7), key
    for name, p in off.items():
        torch.testing.assert_close(on[name], p, rtol=1e-5, atol=1e-6)


def test_checkpointing_with_shared_prompts_is_refused(tmp_path):
    from marag.train.trainer import TrainError

    with pytest.raises(TrainError, match="share_prompts"):
        make(tmp_path, "train.gradient_checkpointing=true", "train.share_prompts=true")
