"""Fixtures for the web tests: a tiny BM25 index over passages written here and run
directories written by the real eval runner."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from webfixtures import (
    PASSAGES,
    PNG,
    QUESTIONS,
    LiveServer,
    make_ctx,
    team,
    vanilla_llm,
    write_training_run,
)

from marag.types import Question, write_jsonl
from marag.workflows import METHODS


@pytest.fixture(scope="session")
def index_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from marag.retrieval import build_index

    root = tmp_path_factory.mktemp("web_index")
    corpus = root / "corpus.jsonl"
    write_jsonl(corpus, [{"id": i, "title": t, "text": x} for i, t, x in PASSAGES])
    return build_index(corpus, root / "idx", kind="bm25", show_progress=False)


@pytest.fixture(scope="session")
def runs_dir(tmp_path_factory: pytest.TempPathFactory, index_dir: Path) -> Path:
    """``jade-team`` (decomposed traces: 2 correct, 2 incorrect) and ``vanilla-team`` (2
    correct, 1 incorrect, 1 failed), written by ``marag.eval.runner.evaluate``, plus a plot."""
    from marag.eval.runner import evaluate

    root = tmp_path_factory.mktemp("runs")
    questions = [Question(id=i, question=q, golden_answers=g, dataset="demo")
                 for i, q, g in QUESTIONS]

    async def write() -> None:
        for name, method, llm in (("jade-team", "jade", team()),
                                  ("vanilla-team", "vanilla", vanilla_llm())):
            ctx = make_ctx(llm, index_dir)
            await evaluate(questions, METHODS[method], ctx, root / name, method_name=method,
                           identity={"dataset": "demo"}, concurrency=1)

    asyncio.run(write())
    plots = root / "jade-team" / "plots"
    plots.mkdir()
    (plots / "f1.png").write_bytes(PNG)
    return root


@pytest.fixture(scope="session")
def train_runs_dir(tmp_path_factory: pytest.TempPathFactory, index_dir: Path,
                   runs_dir: Path) -> Path:
    """``runs_dir``'s two evaluation runs and ``tiny-train``, a training run written by the
    real trainer (2 iterations, each with a checkpoint evaluation)."""
    import shutil

    root = tmp_path_factory.mktemp("train_runs") / "runs"
    shutil.copytree(runs_dir, root)
    write_training_run(root / "tiny-train", index_dir)
    return root


@pytest.fixture
def live_server() -> Iterator[type[LiveServer]]:
    yield LiveServer
