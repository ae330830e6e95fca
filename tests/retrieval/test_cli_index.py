import json

import pytest

from marag.cli import main


def test_index_build_info_search(nq_corpus, tmp_path, capsys):
    out = tmp_path / "idx"
    assert main(["index", "build", "--corpus", str(nq_corpus), "--out", str(out), "--no-progress"]) == 0
    assert "built bm25 index of 60 passages" in capsys.readouterr().out

    assert main(["index", "info", str(out)]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["kind"] == "bm25" and info["count"] == 60

    assert main(["search", str(out), "first nobel prize in physics", "eiffel tower", "-k", "3", "--json"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    hits = [json.loads(line) for line in lines]
    assert [h["query"] for h in hits] == ["first nobel prize in physics", "eiffel tower"]
    assert hits[0]["passages"][0]["id"] == "nq_open-0" and len(hits[0]["scores"]) == 3

    assert main(["search", str(out), "first nobel prize in physics", "-k", "2"]) == 0
    pretty = capsys.readouterr().out
    assert "  1 " in pretty and "nq_open-0" in pretty and "List of Nobel laureates in Physics" in pretty


def test_cli_errors(tmp_path, capsys):
    assert main(["search", str(tmp_path / "nope"), "q"]) == 1
    assert "index directory not found" in capsys.readouterr().err
    assert main(["index", "info", str(tmp_path)]) == 1
    assert "no manifest.json" in capsys.readouterr().err
    assert main(["index", "build", "--corpus", str(tmp_path / "c.jsonl"), "--out", str(tmp_path / "o")]) == 1
    assert "corpus file not found" in capsys.readouterr().err
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "1", "text": "ok"}\n{"id": 2\n')
    assert main(["index", "build", "--corpus", str(bad), "--out", str(tmp_path / "o"), "--no-progress"]) == 1
    assert f"{bad}:2: invalid JSON" in capsys.readouterr().err


def test_search_wiki_demo(demo_cache, capsys):
    assert main(["search", "wiki-demo", "Mona Lisa painting", "-k", "1", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["passages"][0]["title"] == "Mona Lisa"
    assert main(["index", "info", "wiki-demo"]) == 0
    assert json.loads(capsys.readouterr().out)["corpus"]["path"].startswith(str(demo_cache))


@pytest.mark.slow
def test_build_hybrid_from_the_cli(nq_corpus, tmp_path, capsys):
    small = tmp_path / "small.jsonl"
    small.write_text("".join(nq_corpus.read_text().splitlines(keepends=True)[:30]))
    out = tmp_path / "hyb"
    assert main(["index", "build", "--corpus", str(small), "--out", str(out), "--kind", "hybrid",
                 "--batch-size", "16", "--no-progress"]) == 0
    capsys.readouterr()
    assert main(["search", str(out), "first nobel prize in physics", "-k", "2", "--json"]) == 0
    hit = json.loads(capsys.readouterr().out)
    assert hit["passages"][0]["id"] == "nq_open-0"
    assert sorted(p.name for p in out.iterdir()) == ["bm25", "dense", "manifest.json"]
