import gzip
import hashlib
import json

import pytest

from marag import corpus as corpus_mod
from marag.corpus import (
    DocStore,
    build_store,
    checksum_matches,
    file_checksum,
    iter_corpus,
    iter_corpus_lines,
)
from marag.types import Passage


def _write(path, lines):
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def test_flashrag_contents_format(tmp_path):
    f = _write(tmp_path / "c.jsonl", [
        json.dumps({"id": "1", "contents": '"Paris"\nParis is the capital of France.'}),
        json.dumps({"id": 2, "contents": '"Title with "quotes""\nline one\nline two'}),
        json.dumps({"id": "3", "contents": "No title line here"}),
    ])
    ps = list(iter_corpus(f))
    assert ps[0] == Passage("1", "Paris", "Paris is the capital of France.")
    assert ps[1] == Passage("2", 'Title with "quotes"', "line one\nline two")  # int id -> str
    assert ps[2] == Passage("3", "No title line here", "")
    assert ps[0].contents == '"Paris"\nParis is the capital of France.'


def test_title_text_format_and_gzip(tmp_path):
    rows = [{"id": "a", "title": "T", "text": "x y"}, {"id": "b", "text": "no title"}]
    f = tmp_path / "c.jsonl.gz"
    with gzip.open(f, "wt", encoding="utf-8") as g:
        g.write("\n".join(json.dumps(r) for r in rows) + "\n\n")
    assert list(iter_corpus(f)) == [Passage("a", "T", "x y"), Passage("b", "", "no title")]
    assert [n for n, _ in iter_corpus_lines(f)] == [1, 2]


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('{"id": "x", "text": ', "invalid JSON"),
        ('["not", "an", "object"]', "expected a JSON object"),
        ('{"text": "t"}', "missing field 'id'"),
        ('{"id": "x", "title": "t"}', "missing field 'contents' or 'text'"),
        ('{"id": ["x"], "text": "t"}', "field 'id' must be a string"),
        ('{"id": "x", "text": 5}', "field 'text' must be a string"),
        ('{"id": "x", "title": 3, "text": "t"}', "field 'title' must be a string"),
        ('{"id": "x", "contents": null}', "field 'contents' must be a string"),
    ],
)
def test_malformed_line_names_file_and_line(tmp_path, line, message):
    f = _write(tmp_path / "bad.jsonl", [json.dumps({"id": "ok", "text": "fine"}), line])
    with pytest.raises(ValueError, match=message) as e:
        list(iter_corpus(f))
    assert f"{f}:2:" in str(e.value)


def test_missing_file_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="corpus file not found"):
        list(iter_corpus(tmp_path / "nope.jsonl"))


def test_duplicate_ids_name_the_id_and_both_lines(tmp_path):
    f = _write(tmp_path / "dup.jsonl", [
        json.dumps({"id": "a", "text": "1"}),
        json.dumps({"id": "b", "text": "2"}),
        "",
        json.dumps({"id": "a", "text": "3"}),
    ])
    with pytest.raises(ValueError, match=r"duplicate passage id 'a' on lines 1 and 4"):
        list(iter_corpus(f))
    with pytest.raises(ValueError, match=r"duplicate passage id 'a' on lines 1 and 4"):
        build_store(f, tmp_path / "store", show_progress=False)
    assert not (tmp_path / "store" / "store.json").exists()  # no half-valid store left behind


def test_store_fetches_every_passage_by_id_and_row(tmp_path, qa_data):
    src = qa_data / "hotpotqa.corpus.jsonl"
    seen = []
    store = build_store(src, tmp_path / "store", batch_size=50,
                        on_batch=lambda start, ps: seen.append((start, len(ps))), show_progress=False)
    original = list(iter_corpus(src))
    assert len(store) == len(original) == 190
    assert seen[0] == (0, 50) and seen[-1] == (150, 40)
    reopened = DocStore(tmp_path / "store")
    for row, p in enumerate(original):
        assert reopened.get(row) == p
        assert reopened.row_of(p.id) == row
        assert reopened.get_by_id(p.id) == p
    with pytest.raises(KeyError):
        reopened.get_by_id("no-such-id")
    with pytest.raises(IndexError):
        reopened.get(len(original))
    batches = list(reopened.iter_batches(60, start=70))
    assert [b[0] for b in batches] == [70, 130]
    assert [p.id for _, ps in batches for p in ps] == [p.id for p in original[70:]]


def test_store_survives_hash_collisions(tmp_path, monkeypatch):
    # force every id onto one hash value: lookups must still verify the stored id
    monkeypatch.setattr(corpus_mod, "id_hash", lambda pid: 7)
    f = _write(tmp_path / "c.jsonl", [json.dumps({"id": f"p{i}", "text": str(i)}) for i in range(20)])
    store = build_store(f, tmp_path / "s", show_progress=False)
    assert [store.row_of(f"p{i}") for i in range(20)] == list(range(20))


def test_incomplete_store_is_refused(tmp_path):
    (tmp_path / "s").mkdir()
    with pytest.raises(FileNotFoundError, match="not a complete document store"):
        DocStore(tmp_path / "s")


def test_empty_corpus_gives_empty_store(tmp_path):
    store = build_store(_write(tmp_path / "e.jsonl", []), tmp_path / "s", show_progress=False)
    assert len(store) == 0
    with pytest.raises(KeyError):
        store.row_of("x")


def test_checksums(tmp_path, monkeypatch):
    f = _write(tmp_path / "c.jsonl", [json.dumps({"id": "a", "text": "x" * 1000})])
    rec = file_checksum(f)
    assert rec["kind"] == "sha256"
    assert rec["sha256"] == hashlib.sha256(f.read_bytes()).hexdigest()
    assert checksum_matches(f, rec)
    _write(f, [json.dumps({"id": "a", "text": "y" * 1000})])  # same size, new content
    assert not checksum_matches(f, rec)
    monkeypatch.setattr(corpus_mod, "FULL_HASH_LIMIT", 100)
    monkeypatch.setattr(corpus_mod, "PARTIAL_CHUNK", 64)
    part = file_checksum(f)
    assert part["kind"] == "partial-sha256" and part["sha256"] != rec["sha256"]


def test_tar_packed_corpus_is_read_by_its_bytes(tmp_path):
    """Search-R1's wiki-18.jsonl.gz is a tar.gz; a plain tar and a gzip without the .gz name
    are read too: what a file is comes from its bytes, not its name."""
    import gzip
    import tarfile

    from marag.corpus import iter_corpus
    from marag.types import sniff

    plain = tmp_path / "c.jsonl"
    plain.write_text('{"id": "0", "contents": "\\"A\\"\\none"}\n{"id": "1", "text": "two"}\n')
    packed = tmp_path / "wiki-18.jsonl.gz"
    with tarfile.open(packed, "w:gz") as t:
        t.add(plain, arcname="wiki-18.jsonl")
    bare_tar = tmp_path / "bare.jsonl"
    with tarfile.open(bare_tar, "w") as t:
        t.add(plain, arcname="x.jsonl")
    gz_named_plain = tmp_path / "gz.jsonl"
    gz_named_plain.write_bytes(gzip.compress(plain.read_bytes()))
    assert [sniff(p) for p in (plain, packed, bare_tar, gz_named_plain)] == [
        "plain", "tar", "tar", "gzip"]
    want = [(p.id, p.title, p.text) for p in iter_corpus(plain)]
    assert want == [("0", "A", "one"), ("1", "", "two")]
    for path in (packed, bare_tar, gz_named_plain):
        assert [(p.id, p.title, p.text) for p in iter_corpus(path)] == want
    empty = tmp_path / "dir-only.tar"
    (tmp_path / "d").mkdir()
    with tarfile.open(empty, "w") as t:
        t.add(tmp_path / "d", arcname="d")
    with pytest.raises(ValueError, match="holds no regular file"):
        list(iter_corpus(empty))
