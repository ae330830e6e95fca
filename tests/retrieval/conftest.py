"""Indexes built once per test session over real passages (the nq_open fixture corpus)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

# Everything here must work without the Hugging Face hub; set before any HF import.
os.environ.setdefault("HF_HUB_OFFLINE", "1")

N_PASSAGES = 60  # every passage of the nq_open fixture corpus
DENSE_BATCH = 64


@pytest.fixture(scope="session")
def nq_corpus(qa_data, tmp_path_factory) -> Path:
    """The nq_open fixture corpus (N_PASSAGES passages), as a corpus file of its own."""
    out = tmp_path_factory.mktemp("corpus") / "nq.jsonl"
    with open(qa_data / "nq_open.corpus.jsonl", encoding="utf-8") as f:
        lines = f.readlines()
    assert len(lines) == N_PASSAGES
    out.write_text("".join(lines), encoding="utf-8")
    return out


@pytest.fixture(scope="session")
def nq_queries(qa_data) -> list[str]:
    from marag.types import iter_jsonl

    return [q["question"] for _, q in iter_jsonl(qa_data / "nq_open.questions.jsonl")][:40]


@pytest.fixture(scope="session")
def bm25_index(nq_corpus, tmp_path_factory) -> Path:
    from marag.retrieval import build_index

    return build_index(nq_corpus, tmp_path_factory.mktemp("idx") / "bm25", show_progress=False)


@pytest.fixture(scope="session")
def dense_index(nq_corpus, tmp_path_factory) -> Path:
    from marag.retrieval import build_index

    out = tmp_path_factory.mktemp("idx") / "dense"
    return build_index(nq_corpus, out, kind="dense", batch_size=DENSE_BATCH, show_progress=False)


@pytest.fixture(scope="session")
def demo_cache(tmp_path_factory) -> Path:
    """MARAG_CACHE for the session, holding the wiki-demo BM25 index (built once)."""
    from marag.retrieval.factory import demo_index

    cache = tmp_path_factory.mktemp("cache")
    old = os.environ.get("MARAG_CACHE")
    os.environ["MARAG_CACHE"] = str(cache)
    try:
        demo_index("bm25")
        yield cache
    finally:
        if old is None:
            os.environ.pop("MARAG_CACHE", None)
        else:
            os.environ["MARAG_CACHE"] = old


@pytest.fixture(scope="session")
def wiki18_layout(nq_corpus, dense_index, tmp_path_factory) -> dict[str, Path]:
    """The fixture corpus in the layouts Search-R1 and FlashRAG ship wiki-18 in: a corpus of
    ``{"id": "<line>", "contents": "\\"Title\\"\\ntext"}`` lines (plain, gzipped, and
    tar-packed under a ``.jsonl.gz`` name), a faiss ``IndexFlatIP`` file whose row i is
    line i (the MiniLM vectors standing in for E5), and a bm25s index saved by bm25s."""
    import gzip
    import json
    import tarfile

    import bm25s
    import faiss
    import numpy as np
    import Stemmer

    from marag.corpus import iter_corpus

    d = tmp_path_factory.mktemp("wiki18")
    passages = list(iter_corpus(nq_corpus))
    lines = [json.dumps({"id": str(i), "contents": f'"{p.title}"\n{p.text}'}) + "\n"
             for i, p in enumerate(passages)]
    plain = d / "wiki-18.jsonl"
    plain.write_text("".join(lines), encoding="utf-8")
    gz = d / "wiki-18-gzip.jsonl.gz"
    with gzip.open(gz, "wt", encoding="utf-8") as f:
        f.write("".join(lines))
    packed = d / "packed" / "wiki-18.jsonl.gz"  # Search-R1's file: a tar.gz under this name
    packed.parent.mkdir()
    with tarfile.open(packed, "w:gz") as t:
        t.add(plain, arcname="wiki-18.jsonl")
    emb = np.load(dense_index / "embeddings.npy")
    flat = faiss.IndexFlatIP(emb.shape[1])
    flat.add(emb)
    faiss.write_index(flat, str(d / "e5_Flat.index"))
    stemmer = Stemmer.Stemmer("english")
    tokens = bm25s.tokenize([f"{p.title}\n{p.text}" for p in passages], stopwords="en",
                            stemmer=stemmer, show_progress=False)
    model = bm25s.BM25()
    model.index(tokens, show_progress=False)
    model.save(str(d / "bm25"))
    return {"corpus": plain, "gz": gz, "tar": packed, "faiss": d / "e5_Flat.index",
            "bm25": d / "bm25", "dir": d}
