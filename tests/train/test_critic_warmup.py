"""train.critic_warmup: the first iterations move only the value head (the adapter and its
Adam state untouched), later ones the policy too; refused where there is no critic."""

from __future__ import annotations

import pytest
import torch
from test_trainer import _snapshot, make


def _changed(before, module):
    after = dict(module.named_parameters())
    return {n for n, v in before.items() if not torch.equal(v, after[n])}


def test_warm_up_trains_the_value_head_alone_then_the_policy(tmp_path):
    tr = make(tmp_path, "train.iterations=1", "train.critic_warmup=1")
    before = _snapshot(tr.policy)
    [row] = tr.run()
    changed = _changed(before, tr.policy)
    assert changed and all(n.startswith("value_head") for n in changed), changed
    assert row["actor_frozen"] == 1 and row["grad_norm"] == 0.0
    lora = [p for n, p in tr.policy.named_parameters() if "lora_" in n]
    assert all(tr.optimizer.state.get(p, {}) == {} for p in lora)  # Adam never saw them
    assert tr.scheduler.last_epoch == 0  # the schedule starts after the warm-up
    tr = make(tmp_path, "train.iterations=2", "train.critic_warmup=1")  # resumes: iteration 2
    mid = _snapshot(tr.policy)
    [row] = tr.run()
    assert row["actor_frozen"] == 0 and row["grad_norm"] > 0
    assert any("lora_" in n for n in _changed(mid, tr.policy))


def test_without_warm_up_the_first_update_moves_the_adapter(tmp_path):
    tr = make(tmp_path, "train.iterations=1")
    before = _snapshot(tr.policy)
    [row] = tr.run()
    assert row["actor_frozen"] == 0
    assert any("lora_" in n for n in _changed(before, tr.policy))


@pytest.mark.parametrize("setting,why", [("train.estimator=grpo", "has no critic"),
                                         ("train.vf_coef=0", "never trains the value head")])
def test_warm_up_without_a_critic_is_refused(tmp_path, setting, why):
    from marag.train.trainer import TrainError

    with pytest.raises(TrainError, match=why):
        make(tmp_path, setting, "train.kl_mode=loss", "train.critic_warmup=2")
