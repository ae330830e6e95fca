"""Run a peer's Python script unmodified on a machine without CUDA.

Search-R1's retrieval server and FlashRAG's dense encoder call ``.cuda()`` on the encoder and
its inputs whatever the flags say. Here ``.cuda()`` on modules and tensors returns them
unchanged, so they stay on the CPU; every other line that runs is the peer's own.

    PEER_PYTHON benchmarks/peers/cpu_launch.py SCRIPT [ARGS...]
"""

import runpy
import sys

import torch


def _stay(self, *args, **kwargs):
    return self


torch.nn.Module.cuda = _stay
torch.Tensor.cuda = _stay

if __name__ == "__main__":
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    sys.argv = sys.argv[1:]
    runpy.run_path(sys.argv[0], run_name="__main__")
