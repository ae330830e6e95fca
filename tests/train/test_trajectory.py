"""A Search-R1 trajectory trained as one sequence: the calls merged with the observations
masked, and the masked tokens get no gradient and count in no loss mean."""

from __future__ import annotations

import torch
from tests.train.test_learner import fill, learner

from marag.llm.chat import prompt_ids, text_ids
from marag.llm.tiny import build_tiny_model
from marag.roles.search_r1 import build, information
from marag.train.experience import Transition, batch, collect
from marag.train.trajectory import merge_trajectories
from marag.types import Passage, Step, Trace

TURN1 = "<think>find it</think><search> Hamlet author </search>"
TURN2 = "<think>it says Shakespeare</think><answer> William Shakespeare </answer>"
OBS = information([Passage("d1", "Hamlet", "Hamlet is a tragedy by William Shakespeare.")])


def _call(tok, transcript: str, reply: str) -> Step:
    messages = build("Who wrote Hamlet?", transcript)
    ids = text_ids(tok, reply)
    return Step(role="search-r1", messages=messages, raw=reply,
                prompt_token_ids=prompt_ids(tok, messages), token_ids=ids,
                logprobs=[-0.1] * len(ids), sampling={"temperature": 1.0})


def _trace(tok) -> Trace:
    steps = [_call(tok, "", TURN1), Step(role="R", raw="Hamlet author", doc_ids=["d1"]),
             _call(tok, TURN1 + OBS, TURN2)]
    return Trace(id="q", question="Who wrote Hamlet?", method="search-r1", steps=steps,
                 golden_answers=["William Shakespeare"])


def test_calls_merge_into_one_sequence_with_observations_masked():
    _, tok = build_tiny_model(seed=0)
    trace = _trace(tok)
    parts = collect([trace], [[0.0, None, 1.0]], ["search-r1"])
    assert len(parts) == 2
    [t] = merge_trajectories([trace], parts, tok)
    first, last = trace.steps[0], trace.steps[2]
    assert t.prompt_ids == first.prompt_token_ids  # instruction and question only
    assert t.prompt_ids + t.response_ids == last.prompt_token_ids + last.token_ids
    assert t.reward == 1.0 and t.order == 0 and t.loss_mask is not None
    assert len(t.loss_mask) == len(t.response_ids)
    # the masked tokens are exactly the observation: written text decodes back, <information> not
    tail = t.response_ids[:len(t.response_ids) - len(last.token_ids)]
    written = tok.decode([i for i, m in zip(tail, t.loss_mask) if m])
    hidden = tok.decode([i for i, m in zip(tail, t.loss_mask) if not m])
    assert written.replace(" ", "") == TURN1.replace(" ", "")
    assert "<information>" in hidden and "Shakespeare" in hidden and "<search>" not in hidden
    assert t.loss_mask[-len(last.token_ids):] == [1] * len(last.token_ids)
    assert t.trained_tokens == sum(t.loss_mask) < len(t.response_ids)
    # the batch's loss mask carries it, right-aligned with the response
    b = batch([t], pad_id=0)
    assert b.mask[0].tolist()[-len(t.response_ids):] == [float(m) for m in t.loss_mask]


def test_calls_that_do_not_continue_one_text_stay_apart():
    _, tok = build_tiny_model(seed=0)
    trace = _trace(tok)
    trace.steps[2] = _call(tok, "something else" + OBS, TURN2)  # not the first turn's text
    parts = collect([trace], [[0.0, None, 1.0]], ["search-r1"])
    out = merge_trajectories([trace], parts, tok)
    assert [x.loss_mask for x in out] == [None, None] and [x.order for x in out] == [0, 1]


def test_observation_tokens_get_no_gradient():
    """The PPO loss of a merged trajectory does not depend on the observation tokens'
    advantages, old logprobs or their own logprobs: their gradient is exactly zero."""
    lr, _ = learner("train.kl_mode=loss", "train.kl_coef=0.1", "train.entropy_coef=0.01")
    g = torch.Generator().manual_seed(0)
    mask = [1] * 4 + [0] * 6 + [1] * 5
    t = Transition(trace=0, group=0, order=0, role="search-r1",
                   prompt_ids=torch.randint(40, 300, (7,), generator=g).tolist(),
                   response_ids=torch.randint(10, 300, (15,), generator=g).tolist(),
                   rollout_logprobs=[0.0] * 15, temperature=1.0, reward=1.0, loss_mask=mask)
    fill(lr, [t])
    units = (float(t.trained_tokens), float(t.trained_tokens))

    def grads(adv_obs: float) -> list[torch.Tensor]:
        lr.policy.zero_grad()
        t.advantages = torch.where(torch.tensor(mask, dtype=torch.bool),
                                   torch.linspace(-1, 1, 15), torch.full((15,), adv_obs))
        loss, _ = lr.loss([t], units, 1, True)
        loss.backward()
        return [p.grad.clone() for p in lr.policy_params if p.grad is not None]

    a, b = grads(0.0), grads(1e4)
    assert a and all(torch.equal(x, y) for x, y in zip(a, b))
    # and the logprobs scored at observation positions are held at 0 (no target there)
    from marag.train.policy import token_stats

    bt = batch([t], pad_id=0)
    logp, _, _ = token_stats(lr.policy, bt, [None], with_values=False)
    obs = bt.mask[0] == 0
    assert torch.all(logp[0][obs] == 0)


def test_rollout_logprobs_are_refused_for_trajectories():
    import pytest

    from marag.config import load_config
    from marag.train.errors import TrainError
    from marag.train.trainer import check_settings

    cfg = load_config(None, ["method.name=search-r1", "train.old_logprobs=rollout"])
    with pytest.raises(TrainError, match="use train.old_logprobs: recompute"):
        check_settings(cfg)
    check_settings(load_config(None, ["method.name=jade", "train.old_logprobs=rollout"]))


def test_whitening_counts_only_the_tokens_that_train():
    from marag.train.advantages import whiten_stats

    t = Transition(trace=0, group=0, order=0, role="search-r1", prompt_ids=[1],
                   response_ids=[2, 3, 4, 5], rollout_logprobs=[0.0] * 4, temperature=1.0,
                   loss_mask=[1, 0, 0, 1])
    t.advantages = torch.tensor([1.0, 0.0, 0.0, 3.0])
    assert whiten_stats([t]) == (4.0, 10.0, 2.0)


def test_critic_free_estimators_need_two_samples_a_question():
    import pytest

    from marag.config import load_config
    from marag.train.errors import TrainError
    from marag.train.trainer import check_settings

    for bad in (["train.estimator=rloo"], ["train.drop_flat_groups=true"]):
        cfg = load_config(None, [*bad, "train.kl_mode=loss", "train.samples_per_question=1"])
        with pytest.raises(TrainError, match="samples_per_question to 2 or more"):
            check_settings(cfg)
