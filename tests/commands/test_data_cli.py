"""``marag data list`` / ``marag data get``: FlashRAG-format files written from a local hub mirror
(synthetic rows in each dataset's shape), licence and source printed, provenance recorded,
broken lines reported with their numbers while the rest is written, offline and unknown
names refused."""

from __future__ import annotations

import json

import pytest

from hubmirror import Mirror, isolate_hub, jsonl
from marag.cli import main
from marag.datasets import FLASHRAG_REVISION, REGISTRY, load_questions

POPQA = [
    {"id": "test_0", "question": "What is Mirela Tanvik's occupation?",
     "golden_answers": ["cartographer", "map maker"],
     "metadata": {"prop": "occupation", "s_pop": 212,
                  "possible_answers": '["cartographer", "map maker"]'}},
    {"id": "test_1", "question": "In what country is Vellmarsk?", "golden_answers": ["Norland"],
     "metadata": {"prop": "country", "s_pop": 45, "possible_answers": '["Norland"]'}},
]
AMBIG = [
    {"id": "dev_0", "question": "When did the Harbor Line open?",
     "golden_answers": [["1911"], ["March 3, 1913", "1913"]]},
]
BAMBOOGLE = [
    {"id": "test_0", "question": "Who was mayor of the town where the Pell Bridge was built?",
     "golden_answers": ["Rowan Adeyemi"]},
]


@pytest.fixture
def hub(tmp_path, monkeypatch):
    isolate_hub(tmp_path, monkeypatch)
    broken = (jsonl(POPQA[:1]) + b'{"id": "test_x", "question": "cut off\n'
              + jsonl([{"id": "test_y", "question": "   ", "golden_answers": ["a"]}]) + jsonl(POPQA[1:]))
    files = {"popqa/test.jsonl": jsonl(POPQA), "ambig_qa/dev.jsonl": jsonl(AMBIG),
             "bamboogle/test.jsonl": jsonl(BAMBOOGLE), "triviaqa/dev.jsonl": broken}
    with Mirror(files) as mirror:
        monkeypatch.setenv("HF_ENDPOINT", mirror.url)
        yield mirror


def test_list_names_every_dataset_with_its_licence(capsys):
    assert main(["data", "list"]) == 0
    out = capsys.readouterr().out
    for spec in REGISTRY.values():
        assert spec.name in out and spec.licence in out and spec.folder in out
    assert "test*" in out and "14,267" in out


def test_get_writes_flashrag_format_with_licence_and_provenance(hub, tmp_path, capsys):
    out = tmp_path / "data"
    assert main(["data", "get", "popqa", "ambigqa", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert f"popqa (PopQA) test: RUC-NLPIR/FlashRAG_datasets popqa/test.jsonl at {FLASHRAG_REVISION}" in printed
    assert "licence  MIT (https://github.com/AlexTMallen/adaptive-retrieval" in printed
    assert "licence  CC BY-SA 3.0" in printed and "source   PopQA (Mallen et al., ACL 2023)" in printed
    assert f"{hub.url}/datasets/RUC-NLPIR/FlashRAG_datasets/resolve/{FLASHRAG_REVISION}/popqa/test.jsonl" in printed
    assert "2 questions (FlashRAG states 14,267)" in printed

    rows = [json.loads(line) for line in (out / "popqa" / "test.jsonl").read_text().splitlines()]
    assert rows[0] == {"id": "test_0", "question": "What is Mirela Tanvik's occupation?",
                       "golden_answers": ["cartographer", "map maker"],
                       "metadata": {"prop": "occupation", "s_pop": 212,
                                    "possible_answers": ["cartographer", "map maker"]}}
    [ambig] = [json.loads(line) for line in (out / "ambig_qa" / "dev.jsonl").read_text().splitlines()]
    assert ambig["golden_answers"] == ["1911", "March 3, 1913", "1913"]
    assert ambig["metadata"]["answer_sets"] == [["1911"], ["March 3, 1913", "1913"]]

    prov = json.loads((out / "popqa" / "test.provenance.json").read_text())
    assert (prov["revision"], prov["commit"], prov["licence"], prov["questions"], prov["broken"]) == (
        FLASHRAG_REVISION, FLASHRAG_REVISION, "MIT", 2, [])
    assert prov["sha256"] and prov["path_in_repo"] == "popqa/test.jsonl"

    # what it wrote is what evaluation and `marag table --data` read
    assert [q.id for q in load_questions(out / "popqa")] == ["test_0", "test_1"]
    assert load_questions(out / "ambig_qa")[0].dataset == "ambig_qa"
    # a second get comes from the cache
    assert main(["data", "get", "popqa", "--out", str(out)]) == 0
    assert hub.gets["popqa/test.jsonl"] == 1


def test_broken_lines_are_reported_by_number_and_the_rest_written(hub, tmp_path, capsys):
    out = tmp_path / "data"
    assert main(["data", "get", "triviaqa", "--split", "dev", "--out", str(out)]) == 0
    cap = capsys.readouterr()
    assert "triviaqa dev: 2 of 4 records are broken" in cap.err
    assert "triviaqa/dev.jsonl:2: invalid JSON" in cap.err
    assert "triviaqa/dev.jsonl:3: no 'question' text" in cap.err
    assert "2 questions (FlashRAG states 8,837); 2 broken left out" in cap.out
    assert [q.id for q in load_questions(out / "triviaqa", split="dev")] == ["test_0", "test_1"]
    prov = json.loads((out / "triviaqa" / "dev.provenance.json").read_text())
    assert [b["where"] for b in prov["broken"]] == ["triviaqa/dev.jsonl:2", "triviaqa/dev.jsonl:3"]

    strict = tmp_path / "strict"
    assert main(["data", "get", "triviaqa", "--split", "dev", "--out", str(strict), "--strict"]) == 1
    assert "(--strict: nothing written)" in capsys.readouterr().err
    assert not strict.exists()


def test_offline_unknown_and_bad_split(hub, tmp_path, monkeypatch, capsys):
    out = tmp_path / "data"
    assert main(["data", "get", "popqa", "--split", "dev", "--out", str(out)]) == 2
    assert "popqa has no split 'dev' (available: test)" in capsys.readouterr().err
    assert main(["data", "get", "trivia-qa-typo", "--out", str(out)]) == 2
    assert "neither a file nor a known benchmark" in capsys.readouterr().err
    assert main(["data", "get", "bamboogle", "--out", str(out)]) == 0  # cached now
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert main(["data", "get", "bamboogle", "musique", "--out", str(out)]) == 1
    cap = capsys.readouterr()
    assert "bamboogle (Bamboogle) test" in cap.out  # from the cache
    assert "benchmark 'musique'" in cap.err and "offline mode (HF_HUB_OFFLINE)" in cap.err
    assert "HF_ENDPOINT" in cap.err
    assert hub.gets == {"bamboogle/test.jsonl": 1}


def test_revision_flag_and_all(hub, tmp_path, capsys):
    out = tmp_path / "data"
    other = "b" * 40
    assert main(["data", "get", "bamboogle", "--revision", other, "--out", str(out)]) == 1
    assert f"at {other[:12]}" in capsys.readouterr().err
    # `all` plans every dataset's default split; the mirror has three of them
    assert main(["data", "get", "all", "--out", str(out)]) == 1
    cap = capsys.readouterr()
    assert sorted(p.parent.name for p in out.glob("*/*.jsonl")) == ["ambig_qa", "bamboogle", "popqa"]
    assert cap.err.count("could not download it") == len(REGISTRY) - 3
