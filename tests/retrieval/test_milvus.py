"""The Milvus backend against Milvus Lite: same answers as the local index, served unchanged."""

import numpy as np
import pytest

import marag
from marag.config import RetrievalConfig, load_config
from marag.retrieval import RetrievalError, open_index, open_retriever

pytest.importorskip("pymilvus", reason="the Milvus backend needs pymilvus (marag[milvus])")
pytest.importorskip("milvus_lite", reason="Milvus Lite is not installed (pip install milvus-lite)")

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def milvus_db(wiki18_layout, tmp_path_factory):
    from marag.retrieval.imported import import_index
    from marag.retrieval.milvus import index_to_milvus

    d = tmp_path_factory.mktemp("milvus")
    import_index(d / "imp", wiki18_layout["corpus"], faiss_file=wiki18_layout["faiss"],
                 encoder="minilm")
    uri = str(d / "wiki.db")
    report = index_to_milvus(d / "imp", uri, "wiki18", batch=16)
    assert report["rows"] == 60 and report["metric"] == "IP"
    return d / "imp", uri


def test_same_answers_as_the_local_flat_index(milvus_db, nq_queries):
    local_dir, uri = milvus_db
    local = open_index(local_dir)
    remote = open_retriever(RetrievalConfig(backend="milvus", milvus_uri=uri,
                                            collection="wiki18"))
    assert len(remote) == 60
    a, b = local.search_batch(nq_queries, 5), remote.search_batch(nq_queries, 5)
    assert [h.ids for h in a] == [h.ids for h in b]  # top-5 agreement 1.0 on 40 queries
    np.testing.assert_allclose([h.scores for h in a], [h.scores for h in b], atol=1e-5)
    assert [p.text for p in a[0].passages] == [p.text for p in b[0].passages]
    remote.close()


def test_serve_retriever_and_a_method_on_milvus(milvus_db):
    from fastapi.testclient import TestClient

    from marag.api import build_context
    from marag.llm.scripted import ScriptedLLM
    from marag.retrieval.server import create_app

    _, uri = milvus_db
    cfg = load_config(None, ["retrieval.backend=milvus", f"retrieval.milvus_uri={uri}",
                             "retrieval.collection=wiki18", "retrieval.index=null",
                             "method.name=vanilla"])
    retriever = open_retriever(cfg.retrieval)
    with TestClient(create_app(retriever, kind="dense")) as client:
        r = client.post("/retrieve", json={"queries": ["first nobel prize in physics"],
                                           "topk": 2, "return_scores": True})
        assert r.status_code == 200
        assert r.json()["result"][0][0]["document"]["id"] == "0"
    llm = ScriptedLLM({"planner": "<workflow>R, DS, AG</workflow>", "DS": "<id>0</id>",
                       "AG": "<answer>Röntgen</answer>"})
    ctx = build_context(cfg, llms={"default": llm})
    assert ctx.retriever.name == "milvus"
    for method in ("vanilla", "jade"):
        t = marag.ask("who got the first nobel prize in physics", context=ctx, method=method,
                      golden_answers=["Wilhelm Conrad Röntgen"])
        assert t.status == "ok" and t.answer == "Röntgen"
        r_step = next(s for s in t.steps if s.role == "R")
        assert r_step.doc_ids[0] == "0"


def test_milvus_errors(milvus_db, tmp_path):
    from marag.retrieval.milvus import MilvusRetriever, index_to_milvus

    local_dir, uri = milvus_db
    with pytest.raises(RetrievalError, match="Milvus Lite file not found"):
        MilvusRetriever(str(tmp_path / "none.db"))
    with pytest.raises(RetrievalError, match="no Milvus collection 'nope'"):
        MilvusRetriever(uri, "nope")
    with pytest.raises(RetrievalError, match="cannot connect to Milvus at http://127.0.0.1:9"):
        MilvusRetriever("http://127.0.0.1:9", "wiki18")
    with pytest.raises(RetrievalError, match="exists"):
        index_to_milvus(local_dir, uri, "wiki18")


def test_to_milvus_from_the_cli(milvus_db, tmp_path, capsys):
    from marag.cli import main

    local_dir, _ = milvus_db
    uri = str(tmp_path / "cli.db")
    assert main(["index", "to-milvus", str(local_dir), "--uri", uri, "--collection", "c"]) == 0
    assert "copied 60 rows into Milvus collection 'c'" in capsys.readouterr().out
    assert main(["index", "to-milvus", str(local_dir), "--uri", uri, "--collection", "c"]) == 1
    assert "exists at" in capsys.readouterr().err
