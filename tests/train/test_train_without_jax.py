"""A ``marag train`` run never imports JAX or TensorFlow, also where both are installed: a
fake ``jax`` and ``tensorflow`` on the path record every import (issue 40: bm25s initialised
JAX, which then preallocated 75% of the GPU)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

RECORDER = textwrap.dedent("""\
    import os, traceback
    with open(os.environ["MARAG_TEST_IMPORTS"], "a") as f:
        f.write(f"{__name__} imported:\\n" + "".join(traceback.format_stack()) + "\\n")
    """)


def fake_frameworks(root: Path) -> Path:
    """``jax`` (with a ``lax.top_k`` that records its initialisation, as bm25s calls it) and
    ``tensorflow`` packages that record who imports them."""
    for name in ("jax", "tensorflow"):
        (root / name).mkdir(parents=True)
        (root / name / "__init__.py").write_text(RECORDER + ("from . import lax\n"
                                                             if name == "jax" else ""))
    (root / "jax" / "lax.py").write_text(RECORDER + textwrap.dedent("""\
        def top_k(x, k):
            with open(os.environ["MARAG_TEST_IMPORTS"], "a") as f:
                f.write("jax initialised (lax.top_k)\\n")
            return x[:k], list(range(k))
        """))
    return root


def _env(fakes: Path, record: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(fakes), os.environ.get(
        "PYTHONPATH", "")]).rstrip(os.pathsep), "MARAG_TEST_IMPORTS": str(record),
        "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}


@pytest.fixture(scope="module")
def tiny_folder(tmp_path_factory) -> Path:
    from marag.llm.tiny import build_tiny_model

    model, tok = build_tiny_model(seed=0)
    model.config.max_position_embeddings = 4096  # room for vanilla's prompt with 2 passages
    folder = tmp_path_factory.mktemp("tiny")
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


def test_the_fakes_record_what_bm25s_does_unguarded(tmp_path):
    """The control: plain ``import bm25s`` imports and initialises the fake JAX."""
    fakes, record = fake_frameworks(tmp_path / "fakes"), tmp_path / "imports.txt"
    subprocess.run([sys.executable, "-c", "import bm25s"], env=_env(fakes, record),
                   check=True, timeout=120)
    text = record.read_text()
    assert "jax imported" in text and "jax initialised" in text


def test_a_training_run_never_imports_jax_or_tensorflow(tmp_path, qa_data, tiny_folder):
    from marag.retrieval import build_index

    index = build_index(qa_data / "nq_open.corpus.jsonl", tmp_path / "idx", kind="bm25",
                        show_progress=False)
    fakes, record = fake_frameworks(tmp_path / "fakes"), tmp_path / "imports.txt"
    out = tmp_path / "run"
    sets = [f"train.datasets=[{qa_data / 'nq_open.questions.jsonl'}]", "train.iterations=1",
            "train.questions_per_iteration=2", "train.samples_per_question=1",
            "train.lora.r=2", "train.micro_batch_size=2", "train.holdout_per_dataset=0",
            "method.top_k=2", "method.max_tokens.default=4"]
    cmd = [sys.executable, "-m", "marag.cli", "train", "--method", "vanilla", "--model",
           str(tiny_folder), "--index", str(index), "--out", str(out), "--no-progress"]
    for s in sets:
        cmd += ["--set", s]
    done = subprocess.run(cmd, env=_env(fakes, record), capture_output=True, text=True,
                          timeout=600, check=False)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert (out / "metrics.jsonl").is_file() and (out / "tensorboard").is_dir()
    assert not record.exists(), record.read_text()
