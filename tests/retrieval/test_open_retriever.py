import json
import subprocess
import sys

import pytest

from marag.config import RetrievalConfig
from marag.retrieval import BadIndexError, open_retriever
from marag.retrieval.demo import iter_demo_passages, passage_id, source_file


def test_demo_passages_are_real_and_stably_named():
    ps = list(iter_demo_passages())
    assert len(ps) > 9000
    assert len({p.id for p in ps}) == len(ps)
    mona = next(p for p in ps if p.title == "Mona Lisa")
    assert mona.id == passage_id("Mona Lisa") and "Leonardo" in mona.text
    assert source_file().name == "summaries_en-us.json"


@pytest.mark.slow
def test_wiki_demo_bm25_builds_once_and_searches(demo_cache):
    r = open_retriever(RetrievalConfig(index="wiki-demo", kind="bm25"))
    assert len(r) == len(list(iter_demo_passages()))
    hits = r.search_batch(["who painted the Mona Lisa", "theory of general relativity"], 3)
    assert hits[0].passages[0].title == "Mona Lisa"
    assert "relativity" in hits[1].passages[0].title.lower()
    manifest = demo_cache / "indexes" / "wiki-demo-bm25" / "manifest.json"
    built_at = json.loads(manifest.read_text())["build_seconds"]
    open_retriever(RetrievalConfig(index="wiki-demo"))  # second use opens the cached index
    assert json.loads(manifest.read_text())["build_seconds"] == built_at
    assert not list((demo_cache / "indexes").glob("*.tmp-*"))


def test_index_directory_and_errors(bm25_index, tmp_path):
    r = open_retriever(RetrievalConfig(index=str(bm25_index)))
    assert r.search_batch(["nobel prize physics"], 1)[0].ids == ["nq_open-0"]
    with pytest.raises(BadIndexError, match="index directory not found"):
        open_retriever(RetrievalConfig(index=str(tmp_path / "missing")))
    with pytest.raises(BadIndexError, match="neither an index nor a url"):
        open_retriever(RetrievalConfig(index=None))


def test_url_gives_the_http_client():
    import marag.retrieval.client as client_mod

    r = open_retriever(RetrievalConfig(url="http://127.0.0.1:9", timeout=3))
    assert isinstance(r, client_mod.RetrieverClient)


@pytest.mark.slow
def test_offline_encoder_and_demo_in_a_fresh_process(tmp_path):
    """With the hub switched off, MiniLM loads from its PyPI package and wiki-demo builds."""
    code = (
        "import sys; from marag.retrieval.dense import load_encoder, encode;"
        "v = encode(load_encoder('minilm'), ['hello world']); print(v.shape);"
        "from marag.cli import main; sys.exit(main(['search', 'wiki-demo', 'Eiffel Tower', '-k', '1', '--json']))"
    )
    env = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "MARAG_CACHE": str(tmp_path),
           "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300, check=False)
    assert out.returncode == 0, out.stderr[-2000:]
    lines = out.stdout.strip().splitlines()
    assert lines[0] == "(1, 384)"
    assert json.loads(lines[1])["passages"][0]["title"] == "Eiffel Tower"
