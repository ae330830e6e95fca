"""Decoder passes on CUDA go without cuDNN's attention: only that backend is switched, the
setting comes back when the last overlapping pass ends, CPUs are untouched, and the decoder's
forward passes run inside the switch."""

from __future__ import annotations

import torch

from marag.llm import hf_decode
from marag.llm.base import SamplingParams
from marag.llm.cudnn_attention import without_cudnn_attention
from marag.llm.hf_decode import BatchDecoder, Row

CUDA = torch.device("cuda", 0)
cuda = torch.backends.cuda


def _flags() -> tuple[bool, bool, bool, bool]:
    return (cuda.cudnn_sdp_enabled(), cuda.flash_sdp_enabled(),
            cuda.mem_efficient_sdp_enabled(), cuda.math_sdp_enabled())


def test_only_cudnn_is_switched_off_and_the_users_other_choices_stay():
    before = _flags()
    cuda.enable_flash_sdp(False)  # the user's own choice: kept inside and after
    try:
        with without_cudnn_attention(CUDA):
            assert _flags() == (False, False, before[2], before[3])
        assert _flags() == (before[0], False, before[2], before[3])
    finally:
        cuda.enable_flash_sdp(before[1])
    assert _flags() == before


def test_overlapping_passes_put_the_setting_back_only_after_the_last():
    # decoders in two threads: A enters, B enters, A leaves (B still running), B leaves
    cuda.enable_cudnn_sdp(True)
    a, b = without_cudnn_attention(CUDA), without_cudnn_attention(CUDA)
    a.__enter__()
    b.__enter__()
    a.__exit__(None, None, None)
    assert not cuda.cudnn_sdp_enabled()
    b.__exit__(None, None, None)
    assert cuda.cudnn_sdp_enabled()
    cuda.enable_cudnn_sdp(False)  # a user who had it off gets it back off
    with without_cudnn_attention(CUDA):
        pass
    assert not cuda.cudnn_sdp_enabled()
    cuda.enable_cudnn_sdp(True)


def test_a_failing_pass_still_puts_the_setting_back():
    cuda.enable_cudnn_sdp(True)
    try:
        with without_cudnn_attention(CUDA):
            raise RuntimeError("the pass failed")
    except RuntimeError:
        pass
    assert cuda.cudnn_sdp_enabled()


def test_cpu_passes_change_nothing():
    before = _flags()
    with without_cudnn_attention(torch.device("cpu")):
        assert _flags() == before


def test_the_decoders_forward_passes_run_inside_the_switch(tiny, monkeypatch):
    model, tok = tiny
    seen: list[str] = []

    def record(device):
        seen.append(device.type)
        return without_cudnn_attention(device)

    monkeypatch.setattr(hf_decode, "without_cudnn_attention", record)
    decoder = BatchDecoder(model, tok)
    rows = [Row(tok.encode("hello there"), SamplingParams(max_tokens=3), tag=0)]
    queue = list(rows)

    def admit(n: int) -> list[Row]:
        taken, queue[:] = queue[:n], queue[n:]
        return taken

    decoder.run(admit, lambda r, res: None, max_rows=2)
    # one prefill, then a step for each token after the first
    assert seen and set(seen) == {"cpu"}
    assert len(seen) == decoder.stats.prefills + decoder.stats.steps
