"""The decoding loop's token chooser: the vectorised sampler, greedy, top-p and allowed rows."""

import torch

from marag.llm.base import SamplingParams
from marag.llm.hf_decode import Row, _choose, _sample


def _exp_noise(n: int, vocab: int, seed: int = 0) -> torch.Tensor:
    u = torch.rand(n, vocab, generator=torch.Generator().manual_seed(seed))
    return u.log_().neg_()


def test_sampler_follows_the_distribution_and_never_picks_zero_mass():
    probs = torch.tensor([[0.0, 1.0, 0.0, 0.6, 0.4, 0.0]])  # unnormalised
    n = 20000
    picks = _sample(probs.expand(n, -1), _exp_noise(n, 6))
    counts = torch.bincount(picks, minlength=6).double() / n
    assert counts[[0, 2, 5]].sum() == 0
    # binomial standard error at n=20000 is at most 0.0036; 4 sigma
    assert torch.allclose(counts, torch.tensor([0, 0.5, 0, 0.3, 0.2, 0], dtype=torch.double),
                          atol=0.015)


def test_last_bit_noise_in_the_logits_does_not_change_samples():
    # A row's logits alone and inside a batch differ by ~1e-5 (measured on SmolLM2); the draw
    # must not change. Inverse-CDF sampling over this 49k vocabulary changes ~0.85% of draws
    # under such noise (34 of 4000, measured), the exponential race none.
    gen = torch.Generator().manual_seed(0)
    logits = torch.randn(1, 49152, generator=gen) * 3
    jittered = logits + 1e-5 * torch.randn(1, 49152, generator=gen)
    n = 2000
    noise = _exp_noise(n, 49152, seed=1)
    a = _sample(torch.softmax(logits, -1).expand(n, -1), noise)
    b = _sample(torch.softmax(jittered, -1).expand(n, -1), noise)
    assert int((a != b).sum()) <= 1


def _rows(n: int, **params) -> list[Row]:
    sp = SamplingParams(max_tokens=4, **params)
    return [Row([1], sp, generator=torch.Generator().manual_seed(i)) for i in range(n)]


def test_a_sampled_rows_choice_does_not_depend_on_its_batch():
    logits = torch.randn(6, 50, generator=torch.Generator().manual_seed(1)) * 3
    together, _ = _choose(_rows(6, temperature=0.9), logits.clone())
    alone = [_choose(_rows(6, temperature=0.9)[i:i + 1], logits[i:i + 1].clone())[0][0]
             for i in range(6)]
    assert together == alone


def test_greedy_top_p_and_allowed_rows_mix_in_one_batch():
    logits = torch.tensor([[0.0, 5.0, 1.0, 4.9], [0.0, 5.0, 1.0, 4.9], [0.0, 5.0, 1.0, 4.9]])
    greedy = Row([1], SamplingParams(temperature=0.0, max_tokens=4))
    nucleus = Row([1], SamplingParams(temperature=1.0, top_p=0.01, max_tokens=4),
                  generator=torch.Generator().manual_seed(0))
    allowed = Row([1], SamplingParams(temperature=1.0, max_tokens=4),
                  allowed=torch.tensor([True, False, True, False]),
                  generator=torch.Generator().manual_seed(0))
    tokens, logprobs = _choose([greedy, nucleus, allowed], logits.clone())
    assert tokens[0] == 1 and tokens[1] == 1  # top-p 0.01 keeps only the best token
    assert tokens[2] in (0, 2)
    expected = torch.log_softmax(logits[0], -1)[1]
    assert abs(logprobs[0] - float(expected)) < 1e-6


