"""Checkpoints move between the one-process/DDP form (index-keyed optimizer state) and the
FSDP form (name-keyed, through torch's state-dict functions) in both directions."""

from __future__ import annotations

import pytest
import torch

from marag.config import LoraConfig
from marag.llm.tiny import build_tiny_model
from marag.train import checkpoint as ckpt
from marag.train.policy import PolicyValue, attach_lora, hidden_size


def _setup(seed: int):
    torch.manual_seed(seed)
    model, _ = build_tiny_model(seed=0)
    policy = PolicyValue(attach_lora(model, LoraConfig(r=4, target_modules=["q_proj"])),
                         hidden_size(model))
    params = [p for p in policy.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=1e-2)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda it: 1.0)
    return policy, opt, sched


def _step(policy, opt):
    ids = torch.arange(12).reshape(2, 6) % 50 + 3
    logits, values = policy(ids, torch.ones_like(ids), 3)
    (logits.logsumexp(-1).mean() + values.pow(2).mean() + 1.0).backward()
    opt.step()
    opt.zero_grad()


def _same(a_policy, a_opt, b_policy, b_opt):
    a = {n: p for n, p in a_policy.named_parameters() if p.requires_grad}
    b = {n: p for n, p in b_policy.named_parameters() if p.requires_grad}
    assert a.keys() == b.keys()
    for n, value in a.items():
        assert torch.equal(value, b[n]), n
    sa, sb = a_opt.state_dict()["state"], b_opt.state_dict()["state"]
    assert sa.keys() == sb.keys() and sa
    for k in sa:
        for key in ("exp_avg", "exp_avg_sq", "step"):
            assert torch.equal(sa[k][key], sb[k][key]), (k, key)


@pytest.mark.parametrize("by_name", [False, True])
@pytest.mark.parametrize("load_sharded_way", [False, True])
def test_a_checkpoint_loads_either_way(tmp_path, by_name, load_sharded_way):
    policy, opt, sched = _setup(1)
    _step(policy, opt)
    _step(policy, opt)
    state = ckpt.optimizer_state_by_name(policy, opt) if by_name else None
    if by_name:
        assert all(isinstance(k, str) for k in state["state"])
    path = ckpt.save(tmp_path, 2, policy, opt, sched, {}, keep=1, optimizer_state=state)
    fresh, fresh_opt, fresh_sched = _setup(2)
    with pytest.raises(AssertionError):
        _same(policy, opt, fresh, fresh_opt)  # nothing equal before loading
    ckpt.load(path, fresh, fresh_opt, fresh_sched, sharded=load_sharded_way)
    _same(policy, opt, fresh, fresh_opt)
    # and training goes on identically
    _step(policy, opt)
    _step(fresh, fresh_opt)
    _same(policy, opt, fresh, fresh_opt)


def test_the_best_checkpoint_is_kept_across_pruning_and_resumes(tmp_path):
    """keep_best copies a checkpoint's policy when its score beats the recorded one, and
    only then; the record survives a new process (it is read from disk)."""
    import json

    from marag.train.checkpoint import keep_best

    def fake(name: str, text: str):
        d = tmp_path / "checkpoints" / name / "policy"
        d.mkdir(parents=True)
        (d / "adapter_model.safetensors").write_text(text)
        return d.parent

    assert keep_best(tmp_path, fake("iter-000004", "a"), 4, 0.30, "eval.f1")
    assert not keep_best(tmp_path, fake("iter-000008", "b"), 8, 0.25, "eval.f1")
    assert not keep_best(tmp_path, fake("iter-000012", "c"), 12, 0.30, "eval.f1")  # a tie
    assert (tmp_path / "best" / "policy" / "adapter_model.safetensors").read_text() == "a"
    assert keep_best(tmp_path, fake("iter-000016", "d"), 16, 0.41, "eval.f1")
    record = json.loads((tmp_path / "best" / "best.json").read_text())
    assert record == {"iteration": 16, "score": 0.41, "metric": "eval.f1",
                      "checkpoint": "iter-000016"}
    assert (tmp_path / "best" / "policy" / "adapter_model.safetensors").read_text() == "d"
