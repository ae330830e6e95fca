"""Dataset loaders: the real question fixture files, the original datasets' record shapes (built
from those real records), each dataset's own quirks (PopQA, AmbigQA, TriviaQA, Bamboogle; on
synthetic rows written here in each original's format), broken input reported line by line,
seeded sampling, the registry, and named benchmarks served from a local HF cache layout and
from a local hub mirror (with huggingface_hub and over plain HTTP)."""

from __future__ import annotations

import builtins
import gzip
import json
import sys

import pytest

from hubmirror import Mirror, isolate_hub, jsonl
from marag.datasets import (
    FLASHRAG_REVISION,
    REGISTRY,
    DatasetError,
    DatasetUnavailable,
    benchmark_file,
    canonical_name,
    load_questions,
    parse_questions,
    read_questions,
    resolve_benchmark,
)
from marag.types import iter_jsonl

COUNTS = {"hotpotqa": 38, "2wikimultihopqa": 30, "musique": 30, "nq_open": 60}
HUB = "datasets--RUC-NLPIR--FlashRAG_datasets"


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



# ----------------------------------------------------------------------------- each dataset's quirks
# Synthetic rows in each original's format (invented entities, not real data).


def write_table(path, rows, delimiter) -> None:
    import csv

    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]), delimiter=delimiter)
        w.writeheader()
        w.writerows(rows)


POPQA_ROW = {
    "id": "4001", "subj": "Mirela Tanvik", "prop": "occupation", "obj": "cartographer",
    "subj_id": "9001", "prop_id": "22", "obj_id": "9002", "s_aliases": "[]",
    "o_aliases": '["map maker", "mapmaker"]', "s_uri": "http://www.wikidata.org/entity/Q9001",
    "o_uri": "http://www.wikidata.org/entity/Q9002", "s_wiki_title": "Mirela Tanvik",
    "o_wiki_title": "Cartographer", "s_pop": "212", "o_pop": "40311",
    "question": "What is Mirela Tanvik's occupation?",
    "possible_answers": '["cartographer", "map maker", "mapmaker"]',
}


def test_popqa_original_tsv_decodes_json_string_lists(tmp_path):
    second = POPQA_ROW | {"id": "4002", "question": "In what country is Vellmarsk?",
                          "possible_answers": '["Norland"]', "o_aliases": "[]"}
    broken = POPQA_ROW | {"id": "4003", "possible_answers": "cartographer"}
    path = tmp_path / "popQA.tsv"
    write_table(path, [POPQA_ROW, second, broken], "\t")
    result = parse_questions(path)
    assert [q.id for q in result.questions] == ["4001", "4002"]
    q = result.questions[0]
    assert q.golden_answers == ["cartographer", "map maker", "mapmaker"]
    assert q.metadata["o_aliases"] == ["map maker", "mapmaker"] and q.metadata["s_aliases"] == []
    assert "possible_answers" not in q.metadata and q.metadata["s_pop"] == "212"
    [problem] = result.problems
    assert str(problem) == f"{path}:4: 'possible_answers' is not a JSON list (Expecting value)"
    with pytest.raises(DatasetError, match=r"popQA\.tsv:4: 'possible_answers' is not a JSON list"):
        read_questions(path)


def test_popqa_hub_and_flashrag_shapes(tmp_path):
    hub = {**POPQA_ROW, "id": 4001, "s_pop": 212}  # akariasai/PopQA through `datasets`
    flashrag = {"id": "test_0", "question": "What is Mirela Tanvik's occupation?",
                "golden_answers": ["cartographer", "map maker"],
                "metadata": {"prop": "occupation", "s_pop": 212,
                             "possible_answers": '["cartographer", "map maker"]'}}
    path = tmp_path / "popqa" / "test.jsonl"
    path.parent.mkdir()
    write_jsonl(path, [hub, flashrag])
    a, b = load_questions(path.parent)
    assert (a.id, a.golden_answers, a.dataset) == ("4001", ["cartographer", "map maker", "mapmaker"],
                                                   "popqa")
    assert b.golden_answers == ["cartographer", "map maker"]
    assert b.metadata["possible_answers"] == ["cartographer", "map maker"]


AMBIG_ORIGINAL = [
    {"id": "-1001", "question": "When did the Harbor Line open?",
     "annotations": [
         {"type": "multipleQAs", "qaPairs": [
             {"question": "When did the Harbor Line open to freight?", "answer": ["1911"]},
             {"question": "When did the Harbor Line open to passengers?",
              "answer": ["March 3, 1913", "1913"]}]},
         {"type": "singleAnswer", "answer": ["1913"]}]},
    {"id": "-1002", "question": "Who painted the Salt Hall ceiling?",
     "annotations": [{"type": "singleAnswer", "answer": ["Ines Darrow", "I. Darrow"]}]},
]


def test_ambigqa_original_answer_sets_and_qa_pairs(tmp_path):
    path = tmp_path / "dev_light.json"  # AmbigNQ's light file: a JSON array
    path.write_text(json.dumps(AMBIG_ORIGINAL))
    a, b = read_questions(path, dataset="ambigqa")
    assert a.golden_answers == ["1911", "March 3, 1913", "1913"]
    assert a.metadata["answer_sets"] == [["1911"], ["March 3, 1913", "1913"], ["1913"]]
    assert [p["question"] for p in a.metadata["qa_pairs"]] == [
        "When did the Harbor Line open to freight?", "When did the Harbor Line open to passengers?"]
    assert "annotations" not in a.metadata
    assert b.golden_answers == ["Ines Darrow", "I. Darrow"]
    # the same records under a name that says nothing: recognised by their shape
    assert [q.golden_answers for q in read_questions(path)] == [a.golden_answers, b.golden_answers]


def test_ambigqa_hub_columns_flashrag_nesting_and_bad_annotations(tmp_path):
    columnar = {"id": "-1003", "question": "Who won the Cobalt Cup?", "annotations": {
        "type": ["singleAnswer", "multipleQAs"], "answer": [["Oriel"], []],
        "qaPairs": [{"question": [], "answer": []},
                    {"question": ["Who won the Cobalt Cup in 1990?", "Who won it in 1994?"],
                     "answer": [["Oriel"], ["Brenna"]]}]}}
    nested = {"id": "dev_7", "question": "When did the Harbor Line open?",
              "golden_answers": [["1911"], ["1913", "March 3, 1913"]]}
    bad = {"id": "-1004", "question": "q?", "annotations": [{"type": "manyAnswers", "answer": ["x"]}]}
    ragged = {"id": "-1005", "question": "q?", "annotations": {
        "type": ["multipleQAs"], "answer": [[]], "qaPairs": [{"question": ["a?", "b?"],
                                                              "answer": [["x"]]}]}}
    path = tmp_path / "ambig_qa" / "dev.jsonl"
    path.parent.mkdir()
    write_jsonl(path, [columnar, nested, bad, ragged])
    result = parse_questions(path)
    c, n = result.questions
    assert c.golden_answers == ["Oriel", "Brenna"] and len(c.metadata["qa_pairs"]) == 2
    assert n.golden_answers == ["1911", "1913", "March 3, 1913"]
    assert n.metadata["answer_sets"] == [["1911"], ["1913", "March 3, 1913"]]
    assert [str(p) for p in result.problems] == [
        f"{path}:3: annotation type 'manyAnswers' is neither singleAnswer nor multipleQAs",
        f"{path}:4: 'annotations' columns do not line up"]


TRIVIA_ORIGINAL = {"Data": [
    {"Answer": {"Aliases": ["Tallow Bay", "Tallow-Bay"], "NormalizedAliases": ["tallow bay"],
                "MatchedWikiEntityName": "Tallow Bay", "NormalizedValue": "tallow bay",
                "Type": "WikipediaEntity", "Value": "Tallow Bay"},
     "EntityPages": [{"DocSource": "TagMe", "Filename": "Tallow_Bay.txt", "Title": "Tallow Bay"}],
     "Question": "Which bay did the clipper Morrow sail from in 1851?", "QuestionId": "tc_901",
     "QuestionSource": "http://quiz.example.org/",
     "SearchResults": [{"Rank": 0, "Title": "Morrow (ship)", "Url": "http://example.org/"}]},
    {"Answer": {"Aliases": [], "Value": "Ostrava Ring", "Type": "FreeForm"},
     "Question": "What was the 1962 rally around the Kell Hills called?", "QuestionId": "tc_902"},
], "Domain": "Web", "VerifiedEval": False, "Version": 1.0}


def test_triviaqa_original_value_and_aliases(tmp_path):
    path = tmp_path / "triviaqa" / "unfiltered-web-dev.json"
    path.parent.mkdir()
    path.write_text(json.dumps(TRIVIA_ORIGINAL, indent=1))
    a, b = load_questions(path)
    assert (a.id, a.question, a.dataset) == (
        "tc_901", "Which bay did the clipper Morrow sail from in 1851?", "unfiltered-web-dev")
    assert a.golden_answers == ["Tallow Bay", "Tallow-Bay"]
    assert a.metadata == {"question_source": "http://quiz.example.org/", "answer_type": "WikipediaEntity",
                          "matched_wiki_entity_name": "Tallow Bay", "normalized_aliases": ["tallow bay"]}
    assert b.golden_answers == ["Ostrava Ring"]
    # the test split of the original has no answers: refused, not loaded with empty gold
    no_answer = {"Data": [{"Question": "Which river?", "QuestionId": "tc_9"}]}
    path.write_text(json.dumps(no_answer))
    with pytest.raises(DatasetError, match=r"item 0: no golden answers"):
        read_questions(path, dataset="triviaqa")


def test_triviaqa_hub_shape_drops_evidence(tmp_path):
    hub = {"question": "Which bay did the clipper Morrow sail from in 1851?", "question_id": "qz_77",
           "question_source": "http://quiz.example.org/",
           "entity_pages": {"doc_source": ["TagMe"], "title": ["Tallow Bay"]},
           "search_results": {"rank": [0], "title": ["Morrow (ship)"]},
           "answer": {"aliases": ["Tallow Bay", "Tallow-Bay"], "normalized_aliases": ["tallow bay"],
                      "matched_wiki_entity_name": "Tallow Bay", "normalized_matched_wiki_entity_name":
                      "tallow bay", "normalized_value": "tallow bay", "type": "WikipediaEntity",
                      "value": "Tallow Bay"}}
    path = tmp_path / "triviaqa" / "dev.jsonl"
    path.parent.mkdir()
    write_jsonl(path, [hub])
    [q] = load_questions(path.parent, split="dev")
    assert (q.id, q.golden_answers) == ("qz_77", ["Tallow Bay", "Tallow-Bay"])
    assert "entity_pages" not in q.metadata and "search_results" not in q.metadata
    assert q.metadata["answer_type"] == "WikipediaEntity"


def test_bamboogle_sheet_columns(tmp_path):
    rows = [{"Question": "Who was mayor of the town where the Pell Bridge was built?",
             "Answer": "Rowan Adeyemi"},
            {"Question": "What year did the founder of Quarry Press die?", "Answer": "1974"}]
    named = tmp_path / "bamboogle.csv"
    write_table(named, rows, ",")
    a, b = load_questions(named)
    assert (a.id, a.golden_answers, b.id, b.golden_answers) == (
        "bamboogle-0", ["Rowan Adeyemi"], "bamboogle-1", ["1974"])
    other = tmp_path / "sheet.csv"  # no telling name: the capitalised columns say Bamboogle
    write_table(other, rows, ",")
    assert [q.question for q in load_questions(other)] == [a.question, b.question]
    ragged = tmp_path / "ragged.csv"
    ragged.write_text("Question,Answer\nWho?,Ann,extra\nWhat?\nWhen?,1990\n")
    result = parse_questions(ragged)
    assert [q.golden_answers for q in result.questions] == [["1990"]]
    assert [str(p) for p in result.problems] == [f"{ragged}:2: 3 cells for 2 columns",
                                                 f"{ragged}:3: fewer cells than the 2 columns"]


def test_broken_lines_are_each_reported_and_the_rest_kept(tmp_path):
    good = {"id": "test_0", "question": "What is Mirela Tanvik's occupation?",
            "golden_answers": ["cartographer"]}
    lines = [json.dumps(good),
             '{"id": "test_1", "question": "Where is Vellmarsk?", "golden_answers": ["Norland"]',
             json.dumps(good | {"id": "test_2"}),
             json.dumps({"id": "test_3", "question": "q?", "possible_answers": "[oops"}),
             "",
             json.dumps(good | {"id": "test_0", "question": "Again?"}),
             json.dumps(good | {"id": "test_4", "golden_answers": [["nested"], {"no": 1}]}),
             json.dumps(good | {"id": "test_5"})]
    path = tmp_path / "popqa" / "test.jsonl"
    path.parent.mkdir()
    path.write_text("\n".join(lines) + "\n")
    result = parse_questions(path)
    assert [q.id for q in result.questions] == ["test_0", "test_2", "test_5"]
    assert result.records == 7
    assert [(p.where, p.message.split(" (")[0]) for p in result.problems] == [
        (f"{path}:2", "invalid JSON"),
        (f"{path}:4", "'possible_answers' is not a JSON list"),
        (f"{path}:6", "duplicate id 'test_0'"),
        (f"{path}:7", "'golden_answers' holds a list, expected strings"),
    ]
    with pytest.raises(DatasetError) as err:
        read_questions(path)
    message = str(err.value)
    assert message.startswith(f"{path}:2: invalid JSON")
    assert "and 3 more broken records" in message and f"{path}:7:" in message


# ----------------------------------------------------------------------------- registry


def test_registry_records_licence_source_and_pinned_revision():
    import re

    assert re.fullmatch(r"[0-9a-f]{40}", FLASHRAG_REVISION)
    assert set(REGISTRY) == {"nq", "triviaqa", "popqa", "ambigqa", "hotpotqa", "2wiki", "musique",
                             "bamboogle"}
    for spec in REGISTRY.values():
        assert spec.default_split in spec.splits and set(spec.sizes) <= set(spec.splits)
        assert spec.licence and spec.licence_source and spec.source and spec.corpus
        assert spec.revision == FLASHRAG_REVISION and spec.repo == "RUC-NLPIR/FlashRAG_datasets"
    assert (REGISTRY["popqa"].licence, REGISTRY["ambigqa"].licence, REGISTRY["bamboogle"].licence,
            REGISTRY["triviaqa"].licence) == ("MIT", "CC BY-SA 3.0", "MIT", "Apache-2.0")
    assert resolve_benchmark("triviaqa", None) == ("triviaqa", "test", "triviaqa/test.jsonl")
    assert resolve_benchmark("AmbigQA", None) == ("ambigqa", "dev", "ambig_qa/dev.jsonl")
    assert canonical_name("nq_open") == "nq" and canonical_name("trivia-qa-typo") is None


def test_every_column_of_the_seed_tables_has_a_dataset_marag_table_finds(tmp_path):
    """`marag data get` writes OUT/<folder>/<split>.jsonl; `marag table --data OUT` must find it
    for every dataset column of the four papers' main tables."""
    from marag.report.paper_table import find_dataset, known_papers, load_paper

    columns = {c for paper in known_papers() for c in load_paper(paper).question_sets}
    assert columns >= {"nq", "popqa", "ambigqa", "hotpotqa", "2wikimultihopqa", "musique",
                       "bamboogle"}
    for column in columns:
        spec = REGISTRY[canonical_name(column)]
        path = tmp_path / spec.folder / f"{spec.default_split}.jsonl"
        path.parent.mkdir(exist_ok=True)
        path.write_text("{}\n")
        assert find_dataset(tmp_path, column) == path, column


# ----------------------------------------------------------------------------- hub


@pytest.fixture
def hub_env(tmp_path, monkeypatch):
    return isolate_hub(tmp_path, monkeypatch)


def lay_out_cache(cache, filename: str, records, commit: str = FLASHRAG_REVISION) -> None:
    """A file in huggingface_hub's cache layout at ``commit`` (as a download leaves it)."""
    target = cache / HUB / "snapshots" / commit / filename
    target.parent.mkdir(parents=True)
    write_jsonl(target, records)


def test_named_benchmark_from_the_hf_cache_offline(qa_data, hub_env, monkeypatch):
    recs = real(qa_data, "hotpotqa", 5)
    for r in recs:
        r.pop("dataset")  # FlashRAG's files carry no dataset field
    lay_out_cache(hub_env, "hotpotqa/dev.jsonl", recs)
    # the same file at another commit (e.g. main) is not the pinned one
    lay_out_cache(hub_env, "musique/dev.jsonl", real(qa_data, "musique", 2), commit="e" * 40)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    qs = load_questions("hotpotqa", limit=3, seed=1)
    assert len(qs) == 3 and {q.dataset for q in qs} == {"hotpotqa"}
    assert {q.id for q in qs} <= {r["id"] for r in recs}
    with pytest.raises(DatasetUnavailable) as err:
        load_questions("musique")
    message = str(err.value)
    assert "musique/dev.jsonl" in message and "HF_HUB_OFFLINE" in message
    assert FLASHRAG_REVISION[:12] in message
    assert "--dataset path/to/musique_dev.jsonl" in message


def test_named_benchmark_downloads_the_pinned_revision_through_a_hub_mirror(qa_data, hub_env,
                                                                             monkeypatch):
    recs = real(qa_data, "musique", 6)
    with Mirror({"musique/dev.jsonl": jsonl(recs)}) as mirror:
        monkeypatch.setenv("HF_ENDPOINT", mirror.url)
        qs = load_questions("musique")
        assert [q.id for q in qs] == [r["id"] for r in recs]
        assert mirror.gets == {"musique/dev.jsonl": 1}
        assert all(f"/resolve/{FLASHRAG_REVISION}/" in r for r in mirror.requests)
        assert [q.id for q in load_questions("musique", limit=2)] == [q.id for q in load_questions("musique", limit=2)]
        assert mirror.gets == {"musique/dev.jsonl": 1}  # later loads come from the cache
        assert (hub_env / HUB / "snapshots" / FLASHRAG_REVISION / "musique" / "dev.jsonl").is_file()
        with pytest.raises(DatasetUnavailable, match=r"nq/test\.jsonl at [0-9a-f]{12}\): could not "
                                                      r"download it from http://127\.0\.0\.1.*--dataset"):
            load_questions("nq")


def test_revision_override_asks_for_that_revision(hub_env, monkeypatch):
    other = "c0ffee" + "0" * 34
    rows = [{"id": "test_0", "question": "Who was mayor of the town where the Pell Bridge was built?",
             "golden_answers": ["Rowan Adeyemi"]}]
    with Mirror({"bamboogle/test.jsonl": jsonl(rows)}, revision=other) as mirror:
        monkeypatch.setenv("HF_ENDPOINT", mirror.url)
        with pytest.raises(DatasetUnavailable):
            benchmark_file("bamboogle")  # the pin: this mirror does not serve it
        hub = benchmark_file("bamboogle", revision=other)
        assert (hub.commit, hub.revision) == (other, other)
        assert read_questions(hub.path, "bamboogle")[0].golden_answers == ["Rowan Adeyemi"]


def test_plain_http_download_without_huggingface_hub(qa_data, hub_env, monkeypatch):
    recs = real(qa_data, "hotpotqa", 4)
    with Mirror({"hotpotqa/dev.jsonl": jsonl(recs)}) as mirror:
        monkeypatch.setenv("HF_ENDPOINT", mirror.url)
        with monkeypatch.context() as m:
            m.setitem(sys.modules, "huggingface_hub", None)  # `import huggingface_hub` fails
            hub = benchmark_file("hotpotqa")
            assert hub.path == hub_env / HUB / "snapshots" / FLASHRAG_REVISION / "hotpotqa" / "dev.jsonl"
            assert hub.commit == FLASHRAG_REVISION and mirror.gets == {"hotpotqa/dev.jsonl": 1}
            m.setenv("HF_HUB_OFFLINE", "1")
            assert [q.id for q in load_questions("hotpotqa")] == [r["id"] for r in recs]
            with pytest.raises(DatasetUnavailable, match="offline mode"):
                load_questions("2wiki")
        # huggingface_hub back: it reads the same cache layout, nothing is fetched again
        assert [q.id for q in load_questions("hotpotqa")] == [r["id"] for r in recs]
        assert mirror.gets == {"hotpotqa/dev.jsonl": 1}


def test_plain_http_refuses_another_commit_for_the_pin(hub_env, monkeypatch):
    rows = [{"id": "test_0", "question": "q?", "golden_answers": ["a"]}]
    with Mirror({"popqa/test.jsonl": jsonl(rows)}, commit="f" * 40) as mirror:
        monkeypatch.setenv("HF_ENDPOINT", mirror.url)
        real_import = builtins.__import__

        def no_hub(name, *args, **kwargs):
            if name.startswith("huggingface_hub"):
                raise ImportError(name)
            return real_import(name, *args, **kwargs)

        monkeypatch.setattr(builtins, "__import__", no_hub)
        with pytest.raises(DatasetUnavailable, match=f"answered commit f{{40}} for revision {FLASHRAG_REVISION}"):
            benchmark_file("popqa")
        assert not (hub_env / HUB / "snapshots").exists() or not any(
            (hub_env / HUB / "snapshots").rglob("*.jsonl"))
