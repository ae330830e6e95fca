"""JAX and TensorFlow in marag's process: kept out, and kept small where they come in anyway.

marag runs on torch alone, but two libraries it imports load JAX or TensorFlow when one is
installed, as it is on many cluster images (JAX with its CUDA plugin):

* ``import bm25s`` (every BM25 index) imports ``bm25s.selection``, which imports ``jax.lax``
  and runs a top-k at once: that initialises JAX's GPU backend, and JAX then preallocates
  75% of the GPU's memory for itself. A 7B policy's first update ran out of memory with 60 GiB
  of an 80 GiB card held outside PyTorch (issue 40). ``without_jax`` hides JAX while bm25s
  imports (bm25s then selects with numpy, which marag's own top-k replaces anyway).
* ``torch.utils.tensorboard.SummaryWriter`` (``train.Logbook``) writes through
  ``tensorboard.compat.tf``, which imports TensorFlow when it is installed.
  ``tensorboard_without_tensorflow`` selects tensorboard's own TensorFlow stub, through the
  switch tensorboard reads for that (a module named ``tensorboard.compat.notf``).

``set_env_defaults`` runs when ``marag`` is imported, before anything heavy: should JAX or
TensorFlow start in the process all the same (the user's own code, another library), they
allocate GPU memory as they need it instead of up front. A value the user set is kept.

transformers 5 has no TensorFlow or Flax code left (its ``USE_TF``/``USE_JAX``/``USE_FLAX``
switches went with it), so there is nothing there to switch off.
"""

from __future__ import annotations

import os
import sys
import types
from collections.abc import Iterator
from contextlib import contextmanager

ENV_DEFAULTS = {
    # JAX (XLA's GPU client): allocate on demand, not 75% of the device at initialisation
    "XLA_PYTHON_CLIENT_PREALLOCATE": "false",
    # TensorFlow: grow the GPU memory it holds as needed, not all of it at the first GPU op
    "TF_FORCE_GPU_ALLOW_GROWTH": "true",
}

_HIDDEN = ("jax", "jax.lax", "jax.numpy")


def set_env_defaults(environ: dict[str, str] | os._Environ[str] | None = None) -> dict[str, str]:
    """Set each of ``ENV_DEFAULTS`` the environment does not have yet (a value the user set,
    also an empty one, is kept). Returns what was set."""
    env = os.environ if environ is None else environ
    added = {k: v for k, v in ENV_DEFAULTS.items() if k not in env}
    env.update(added)
    return added


@contextmanager
def without_jax() -> Iterator[None]:
    """While the block runs, ``import jax`` (and its submodules above) raises ImportError,
    unless JAX is already imported (then the process has it anyway, and nothing changes).
    For importing a library that would initialise JAX merely by being imported."""
    if "jax" in sys.modules:
        yield
        return
    for name in _HIDDEN:
        sys.modules[name] = None  # type: ignore[assignment]  # the import system's "absent"
    try:
        yield
    finally:
        for name in _HIDDEN:
            if name in sys.modules and sys.modules[name] is None:
                del sys.modules[name]


def import_bm25s() -> types.ModuleType:
    """``bm25s``, imported without JAX (see the module's docstring)."""
    if "bm25s" not in sys.modules:
        with without_jax():
            import bm25s  # noqa: F401
    return sys.modules["bm25s"]


def tensorboard_without_tensorflow() -> None:
    """Make tensorboard write its event files through its own TensorFlow stub, not an
    installed TensorFlow (importing it costs seconds and memory and may claim a GPU). Kept
    as it is when TensorFlow is already imported."""
    name = "tensorboard.compat.notf"
    if "tensorflow" not in sys.modules and name not in sys.modules:
        sys.modules[name] = types.ModuleType(name, "marag: tensorboard without TensorFlow")
