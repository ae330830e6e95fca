from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from marag.types import Question, iter_jsonl


def read_questions(path: Path, limit: int) -> list[Question]:
    out = []
    for _, d in iter_jsonl(path):
        out.append(Question(id=d["id"], question=d["question"],
                            golden_answers=d["golden_answers"], dataset=d["dataset"]))
        if len(out) == limit:
            break
    return out


@pytest.fixture(scope="session")
def nq_index(qa_data, tmp_path_factory) -> Path:
    from marag.retrieval import build_index

    return build_index(qa_data / "nq_open.corpus.jsonl", tmp_path_factory.mktemp("nq_bm25"),
                       kind="bm25", show_progress=False)


@pytest.fixture
def nq_questions(qa_data) -> list[Question]:
    return read_questions(qa_data / "nq_open.questions.jsonl", 12)


@pytest.fixture
def ctx_factory(nq_index):
    from marag.retrieval import open_index

    def make(llm):
        return SimpleNamespace(llm=llm, retriever=open_index(nq_index))

    return make
