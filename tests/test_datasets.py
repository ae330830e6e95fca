"""Dataset loaders: the real question fixture files, the original datasets' record shapes (built
from those real records), broken input, seeded sampling, and named benchmarks served from a
local HF cache layout and from a local hub mirror."""

from __future__ import annotations

import gzip
import hashlib
import http.server
import json
import threading
from typing import Self

import pytest

from marag.datasets import (
    DatasetError,
    DatasetUnavailable,
    load_questions,
    read_questions,
    resolve_benchmark,
)
from marag.types import iter_jsonl

COUNTS = {"hotpotqa": 38, "2wikimultihopqa": 30, "musique": 30, "nq_open": 60}
HUB = "datasets--RUC-NLPIR--FlashRAG_datasets"
COMMIT = "0123456789abcdef0123456789abcdef01234567"


def real(qa_data, name: str, n: int) -> list[dict]:
    out = []
    for _, obj in iter_jsonl(qa_data / f"{name}.questions.jsonl"):
        out.append(obj)
        if len(out) == n:
            break
    return out


def write_jsonl(path, records) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))


@pytest.mark.parametrize("name,count", COUNTS.items())
def test_question_files_load_completely(qa_data, name, count):
    qs = load_questions(qa_data / f"{name}.questions.jsonl")
    assert len(qs) == count
    assert len({q.id for q in qs}) == count
    assert all(q.question and q.golden_answers and q.dataset == name for q in qs)
    assert all("supporting_titles" in q.metadata for q in qs)
    first = next(iter_jsonl(qa_data / f"{name}.questions.jsonl"))[1]
    assert (qs[0].id, qs[0].question, qs[0].golden_answers) == (
        first["id"], first["question"], first["golden_answers"])


def test_hotpotqa_original_json_array(qa_data, tmp_path):
    recs = real(qa_data, "hotpotqa", 3)
    original = [{"_id": r["id"], "question": r["question"], "answer": r["golden_answers"][0],
                 "type": r.get("type"), "supporting_facts": [[t, 0] for t in r["supporting_titles"]]}
                for r in recs]
    path = tmp_path / "hotpot_dev_distractor_v1.json"
    path.write_text(json.dumps(original, indent=1))
    qs = load_questions(path)
    assert [q.id for q in qs] == [r["id"] for r in recs]
    assert [q.golden_answers for q in qs] == [[r["golden_answers"][0]] for r in recs]
    assert qs[0].metadata["supporting_facts"] == original[0]["supporting_facts"]
    assert qs[0].dataset == "hotpot_dev_distractor_v1"


def test_2wiki_original_gzipped_array(qa_data, tmp_path):
    recs = real(qa_data, "2wikimultihopqa", 4)
    original = [{"_id": r["id"], "type": r["type"], "question": r["question"],
                 "answer": r["golden_answers"][0], "evidences": r["evidences"]} for r in recs]
    path = tmp_path / "dev.json.gz"
    with gzip.open(path, "wt", encoding="utf-8") as f:
        json.dump(original, f)
    qs = read_questions(path, dataset="2wiki")
    assert [q.id for q in qs] == [r["id"] for r in recs]
    assert qs[1].metadata == {"type": recs[1]["type"], "evidences": recs[1]["evidences"]}
    assert {q.dataset for q in qs} == {"2wiki"}


def test_musique_original_merges_aliases(qa_data, tmp_path):
    recs = real(qa_data, "musique", 3)
    original = [{"id": r["id"], "question": r["question"], "answer": r["golden_answers"][0],
                 "answer_aliases": [r["golden_answers"][0].upper(), r["golden_answers"][0]],
                 "answerable": True} for r in recs]
    path = tmp_path / "musique_ans_v1.0_dev.jsonl.gz"
    with gzip.open(path, "wt", encoding="utf-8") as f:
        f.writelines(json.dumps(o) + "\n" for o in original)
    qs = load_questions(path)
    a = recs[0]["golden_answers"][0]
    assert qs[0].golden_answers == ([a, a.upper()] if a != a.upper() else [a])  # deduplicated
    assert qs[0].metadata == {"answerable": True}


def test_nq_open_shape_gets_stable_ids(qa_data, tmp_path):
    recs = real(qa_data, "nq_open", 3)
    path = tmp_path / "NQ-open.dev.jsonl"
    write_jsonl(path, [{"question": r["question"], "answer": r["golden_answers"]} for r in recs])
    qs = load_questions(path)
    assert [q.id for q in qs] == ["NQ-open-0", "NQ-open-1", "NQ-open-2"]
    assert [q.golden_answers for q in qs] == [r["golden_answers"] for r in recs]


def test_flashrag_metadata_and_numeric_answers(tmp_path):
    path = tmp_path / "popqa" / "test.jsonl"
    path.parent.mkdir()
    write_jsonl(path, [{"id": 7, "question": "How many moons does Mars have? ",
                        "golden_answers": [2, "two"], "metadata": {"prop": "count"}, "extra": 1}])
    [q] = load_questions(path.parent)  # a directory: its test.jsonl
    assert (q.id, q.question, q.golden_answers, q.dataset) == ("7", "How many moons does Mars have?",
                                                               ["2", "two"], "popqa")
    assert q.metadata == {"prop": "count", "extra": 1}


@pytest.mark.parametrize("lines,message", [
    (['{"id": "a", "question": "q", "golden_answers": ["x"]}', '{"id": "b", "question": "q"',
      ], r"bad\.jsonl:2: invalid JSON"),
    (['{"id": "a", "question": "q", "golden_answers": ["x"]}', '{"id": "b", "golden_answers": ["x"]}'],
     r"bad\.jsonl:2: no 'question' text"),
    # blank as every surface counts it (marag.types.is_blank), U+FEFF and U+0085 included
    (['{"id": "a", "question": "\\ufeff\\u0085 ", "golden_answers": ["x"]}'],
     r"bad\.jsonl:1: no 'question' text"),
    (['', '{"id": "a", "question": "q"}'], r"bad\.jsonl:2: no golden answers"),
    (['{"id": "a", "question": "q", "golden_answers": []}'], r"bad\.jsonl:1: empty golden answers"),
    (['{"id": "a", "question": "q", "answer": "  "}'], r"bad\.jsonl:1: empty golden answers"),
    (['{"id": "a", "question": "q", "answer": {"text": "x"}}'], r"bad\.jsonl:1: 'answer' holds a dict"),
    (['["not", "an", "object"]'], r"bad\.jsonl:1: expected a JSON object"),
    (['{"id": "a", "question": "q", "answer": "x"}', '{"id": "a", "question": "r", "answer": "y"}'],
     r"bad\.jsonl:2: duplicate id 'a' \(first at .*bad\.jsonl:1\)"),
    (['', '  '], r"bad\.jsonl: no questions in file"),
])
def test_broken_files_name_file_and_line(tmp_path, lines, message):
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(DatasetError, match=message):
        load_questions(path)


def test_broken_json_array_names_the_item(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps([{"_id": "1", "question": "q", "answer": "a"}, {"_id": "2", "answer": "b"}]))
    with pytest.raises(DatasetError, match=r"bad\.json: item 1: no 'question'"):
        load_questions(path)


def test_sampling_is_seeded_stable_and_prefix_consistent(qa_data, tmp_path):
    path = qa_data / "hotpotqa.questions.jsonl"
    a = [q.id for q in load_questions(path, limit=25, seed=3)]
    assert a == [q.id for q in load_questions(path, limit=25, seed=3)]
    assert a[:10] == [q.id for q in load_questions(path, limit=10, seed=3)]
    assert len(set(a)) == 25
    assert a != [q.id for q in load_questions(path, limit=25, seed=4)]
    # the sample depends on the ids, not on the order of lines in the file
    lines = path.read_text().splitlines()
    shuffled = tmp_path / "shuffled.jsonl"
    shuffled.write_text("\n".join(lines[::-1]) + "\n")
    assert a == [q.id for q in load_questions(shuffled, limit=25, seed=3)]
    every = load_questions(path)
    assert sorted(q.id for q in load_questions(path, limit=10_000)) == sorted(q.id for q in every)
    with pytest.raises(DatasetError, match="limit must be at least 1"):
        load_questions(path, limit=0)


def test_unknown_names_splits_and_missing_files():
    with pytest.raises(DatasetError, match="neither a file nor a known benchmark"):
        load_questions("trivia-qa-typo")
    with pytest.raises(DatasetError, match=r"no split 'test' \(available: train, dev\)"):
        load_questions("hotpotqa", split="test")
    with pytest.raises(FileNotFoundError, match="dataset file not found"):
        load_questions("no/such/file.jsonl")
    assert resolve_benchmark("2WikiMultihopQA", None) == ("2wiki", "dev", "2wikimultihopqa/dev.jsonl")
    assert resolve_benchmark("nq", None) == ("nq", "test", "nq/test.jsonl")
    assert resolve_benchmark("bamboogle", None)[2] == "bamboogle/test.jsonl"


@pytest.fixture
def hub_env(tmp_path, monkeypatch):
    """An empty HF cache under tmp_path; online unless a test says otherwise."""
    from huggingface_hub import constants

    cache = tmp_path / "hf-cache"
    cache.mkdir()
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    return cache


def lay_out_cache(cache, filename: str, records) -> None:
    repo = cache / HUB
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(COMMIT)
    target = repo / "snapshots" / COMMIT / filename
    target.parent.mkdir(parents=True)
    write_jsonl(target, records)


def test_named_benchmark_from_the_hf_cache_offline(qa_data, hub_env, monkeypatch):
    recs = real(qa_data, "hotpotqa", 5)
    for r in recs:
        r.pop("dataset")  # FlashRAG's files carry no dataset field
    lay_out_cache(hub_env, "hotpotqa/dev.jsonl", recs)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    qs = load_questions("hotpotqa", limit=3, seed=1)
    assert len(qs) == 3 and {q.dataset for q in qs} == {"hotpotqa"}
    assert {q.id for q in qs} <= {r["id"] for r in recs}
    with pytest.raises(DatasetUnavailable) as err:
        load_questions("musique")
    message = str(err.value)
    assert "musique/dev.jsonl" in message and "HF_HUB_OFFLINE" in message
    assert "--dataset path/to/musique_dev.jsonl" in message


class Mirror:
    """A local stand-in for the hub's file endpoint serving one real file."""

    def __init__(self, filename: str, data: bytes) -> None:
        self.filename, self.data, self.gets = filename, data, 0
        mirror = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _headers(self) -> bool:
                if self.path.endswith(f"/resolve/main/{mirror.filename}"):
                    self.send_response(200)
                    self.send_header("X-Repo-Commit", COMMIT)
                    self.send_header("ETag", f'"{hashlib.sha1(mirror.data).hexdigest()}"')
                    self.send_header("Content-Length", str(len(mirror.data)))
                    self.end_headers()
                    return True
                self.send_response(404)
                self.send_header("X-Error-Code", "EntryNotFound")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return False

            def do_HEAD(self):
                self._headers()

            def do_GET(self):
                if self._headers():
                    mirror.gets += 1
                    self.wfile.write(mirror.data)

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> Self:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_named_benchmark_downloads_through_a_hub_mirror(qa_data, hub_env, monkeypatch):
    recs = real(qa_data, "musique", 6)
    data = "".join(json.dumps(r) + "\n" for r in recs).encode()
    with Mirror("musique/dev.jsonl", data) as mirror:
        monkeypatch.setenv("HF_ENDPOINT", mirror.url)
        qs = load_questions("musique")
        assert [q.id for q in qs] == [r["id"] for r in recs]
        assert mirror.gets == 1
        assert [q.id for q in load_questions("musique", limit=2)] == [q.id for q in load_questions("musique", limit=2)]
        assert mirror.gets == 1  # later loads come from the cache
        assert list((hub_env / HUB / "snapshots" / COMMIT / "musique").iterdir())
        with pytest.raises(DatasetUnavailable, match=r"nq/test\.jsonl\): could not download it .*--dataset"):
            load_questions("nq")
