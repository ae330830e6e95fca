"""marag's process defaults for JAX and TensorFlow (marag.jax_tf): set at ``import marag``
unless the user set them, and the guards that keep both frameworks out."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from marag.jax_tf import ENV_DEFAULTS, set_env_defaults, tensorboard_without_tensorflow, without_jax

SHOW = ("import json, os, marag; print(json.dumps({k: os.environ.get(k) for k in "
        f"{sorted(ENV_DEFAULTS)!r}}}))")


def _env_after_import(**user: str) -> dict[str, str | None]:
    env = {k: v for k, v in os.environ.items() if k not in ENV_DEFAULTS}
    out = subprocess.run([sys.executable, "-c", SHOW], env={**env, **user}, check=True,
                         capture_output=True, text=True, timeout=120)
    return json.loads(out.stdout)


def test_import_marag_sets_the_defaults():
    assert _env_after_import() == {"TF_FORCE_GPU_ALLOW_GROWTH": "true",
                                   "XLA_PYTHON_CLIENT_PREALLOCATE": "false"}


def test_a_users_own_values_are_kept():
    user = {"XLA_PYTHON_CLIENT_PREALLOCATE": "true", "TF_FORCE_GPU_ALLOW_GROWTH": "false"}
    assert _env_after_import(**user) == user
    # one set, the other defaulted
    assert _env_after_import(XLA_PYTHON_CLIENT_PREALLOCATE="true") == {
        "TF_FORCE_GPU_ALLOW_GROWTH": "true", "XLA_PYTHON_CLIENT_PREALLOCATE": "true"}


def test_set_env_defaults_keeps_an_empty_value_and_reports_what_it_set():
    env = {"XLA_PYTHON_CLIENT_PREALLOCATE": ""}
    assert set_env_defaults(env) == {"TF_FORCE_GPU_ALLOW_GROWTH": "true"}
    assert env == {"XLA_PYTHON_CLIENT_PREALLOCATE": "", "TF_FORCE_GPU_ALLOW_GROWTH": "true"}
    assert set_env_defaults(env) == {}


def test_without_jax_hides_jax_only_inside_the_block(monkeypatch):
    monkeypatch.delitem(sys.modules, "jax", raising=False)
    with without_jax():
        with pytest.raises(ImportError):
            import jax
        with pytest.raises(ImportError):
            import jax.lax  # noqa: F401
    assert "jax" not in sys.modules and "jax.lax" not in sys.modules


def test_without_jax_leaves_an_imported_jax_alone(monkeypatch):
    fake = type(sys)("jax")
    monkeypatch.setitem(sys.modules, "jax", fake)
    with without_jax():
        import jax

        assert jax is fake
    assert sys.modules["jax"] is fake


def test_tensorboard_stub_is_chosen_unless_tensorflow_is_loaded(monkeypatch):
    name = "tensorboard.compat.notf"
    monkeypatch.delitem(sys.modules, name, raising=False)
    monkeypatch.setitem(sys.modules, "tensorflow", type(sys)("tensorflow"))
    tensorboard_without_tensorflow()
    assert name not in sys.modules  # TensorFlow is there anyway: tensorboard may use it
    monkeypatch.delitem(sys.modules, "tensorflow")
    tensorboard_without_tensorflow()
    assert name in sys.modules
