"""Benchmark questions: local files in the common QA shapes, or FlashRAG's copies on the HF hub.

``load_questions(path_or_name)`` accepts

- a local file (``.jsonl``, ``.json`` array, ``.tsv``/``.csv`` with a header row, any of them
  gzipped) whose records are in FlashRAG's shape ``{"id", "question", "golden_answers",
  "metadata"}`` or an original dataset's: HotpotQA and 2WikiMultihopQA (``_id``, ``question``,
  ``answer``), MuSiQue (``id``, ``question``, ``answer``, ``answer_aliases``), NQ-open
  (``question``, ``answer``/``answers`` list), PopQA (``possible_answers`` as a JSON-encoded
  string), AmbigQA (``annotations``: answer sets and question-answer pairs), TriviaQA
  (``Answer``/``answer`` object with ``Value`` and ``Aliases``; a ``{"Data": [...]}`` file) and
  Bamboogle (``Question``, ``Answer``). Each dataset's quirks are normalised by its own function
  (``NORMALISERS``), picked by the dataset's name or, for an unknown name, by the record's
  shape. Fields that are not the id, question or answers are kept in ``Question.metadata``.
- a benchmark name (``REGISTRY``: ``nq``, ``triviaqa``, ``popqa``, ``ambigqa``, ``hotpotqa``,
  ``2wiki``, ``musique``, ``bamboogle``), fetched from the ``RUC-NLPIR/FlashRAG_datasets``
  dataset repository at a pinned commit into the Hugging Face cache (offline: from the cache
  only). ``marag data get NAME`` writes the same file, normalised and validated, into a data
  folder, with the dataset's licence and source.

A record without a question or without golden answers, or a line that is not JSON, is an
error naming the file and line: a benchmark silently missing items would skew every number.
``parse_questions`` reads on past such records and returns every problem with its line;
``read_questions`` (what evaluation uses) refuses a file that has any.

``limit`` draws a seeded sample: items are ranked by a hash of ``(seed, id)`` and the first
``limit`` are taken, so the same seed gives the same items on every machine and Python
version, and a smaller limit is a prefix of a larger one.
"""

from __future__ import annotations

import csv
import hashlib
import json
import logging
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from marag.types import Question, is_blank, open_text

log = logging.getLogger(__name__)

HUB_REPO = "RUC-NLPIR/FlashRAG_datasets"
# The commit of RUC-NLPIR/FlashRAG_datasets every named benchmark is read at (the one that
# uploaded the current ambig_qa files; read off the hub's pages, docs/datasets.md says how).
# Files at a commit never change, so a cached copy is used without asking the hub again.
FLASHRAG_REVISION = "87aab18c372ee7714a7288c7d660423c7ee96dde"
# what the FlashRAG_datasets card declares for the repository as a whole
FLASHRAG_LICENCE = "CC BY-SA 4.0 (the FlashRAG_datasets card, for the collection)"
DEFAULT_ENDPOINT = "https://huggingface.co"


class DatasetError(ValueError):
    """A dataset that cannot be loaded as asked: bad record, unknown name or split."""


class DatasetUnavailable(DatasetError):
    """A named benchmark that is neither cached nor downloadable right now."""


# ----------------------------------------------------------------------------- registry


@dataclass(frozen=True)
class DatasetSpec:
    """One benchmark: where FlashRAG keeps it, under which licence, from which source."""

    name: str  # canonical key (marag's): "popqa"
    title: str  # as the papers write it: "PopQA"
    folder: str  # folder in the hub repository and under ``marag data get --out``
    splits: tuple[str, ...]
    default_split: str  # what the papers report on
    kind: str  # "single-hop" / "multi-hop"
    licence: str  # the original dataset's licence
    licence_source: str  # where that licence is stated
    source: str  # the original dataset: paper and where its authors publish it
    corpus: str  # how it pairs with the wiki-18 corpus (docs/datasets.md)
    sizes: dict[str, int] = field(default_factory=dict)  # FlashRAG's stated question counts
    repo: str = HUB_REPO
    revision: str = FLASHRAG_REVISION

    def path_in_repo(self, split: str) -> str:
        return f"{self.folder}/{split}.jsonl"


_DPR = "the DPR split that wiki-18 (Wikipedia, Dec 2018, 21M passages) was cut for"
REGISTRY: dict[str, DatasetSpec] = {s.name: s for s in (
    DatasetSpec(
        "nq", "NQ", "nq", ("train", "dev", "test"), "test", "single-hop",
        "CC BY-SA 3.0", "https://github.com/google-research-datasets/natural-questions",
        "Natural Questions (Kwiatkowski et al., TACL 2019), open-domain subset NQ-open "
        "(Lee et al., ACL 2019)",
        f"answers are Wikipedia spans; {_DPR}",
        {"train": 79168, "dev": 8757, "test": 3610}),
    DatasetSpec(
        "triviaqa", "TriviaQA", "triviaqa", ("train", "dev", "test"), "test", "single-hop",
        "Apache-2.0", "https://github.com/mandarjoshi90/triviaqa (README: the Apache 2.0 "
        "licence applies to both the code and the data)",
        "TriviaQA (Joshi et al., ACL 2017), unfiltered open-domain questions; answer = value "
        "+ aliases",
        f"trivia questions with Wikipedia and web evidence; {_DPR}",
        {"train": 78785, "dev": 8837, "test": 11313}),
    DatasetSpec(
        "popqa", "PopQA", "popqa", ("test",), "test", "single-hop",
        "MIT", "https://github.com/AlexTMallen/adaptive-retrieval (LICENSE; the akariasai/PopQA "
        "hub card states none)",
        "PopQA (Mallen et al., ACL 2023): 14k entity questions from Wikidata triples, "
        "hub copy akariasai/PopQA",
        "long-tail entities (Wikipedia page views in s_pop); retrieved from wiki-18 by FlashRAG, "
        "JADE and M-ASK, though a rare entity's page may postdate Dec 2018",
        {"test": 14267}),
    DatasetSpec(
        "ambigqa", "AmbigQA", "ambig_qa", ("train", "dev"), "dev", "single-hop",
        "CC BY-SA 3.0", "https://nlp.cs.washington.edu/ambigqa/ (the dataset's info; "
        "sewon/ambig_qa hub card)",
        "AmbigNQ (Min et al., EMNLP 2020): NQ-open questions re-annotated with every plausible "
        "answer set, github.com/shmsw25/AmbigQA",
        "NQ-open's questions, so wiki-18 fits; annotators searched live Wikipedia (Google "
        "Search restricted to Wikipedia), so a disambiguated answer may be missing from wiki-18",
        {"train": 10036, "dev": 2002}),
    DatasetSpec(
        "hotpotqa", "HotpotQA", "hotpotqa", ("train", "dev"), "dev", "multi-hop",
        "CC BY-SA 4.0", "https://hotpotqa.github.io/",
        "HotpotQA (Yang et al., EMNLP 2018), distractor/fullwiki questions",
        "built on first paragraphs of a 2017 Wikipedia dump; the papers retrieve from wiki-18",
        {"train": 90447, "dev": 7405}),
    DatasetSpec(
        "2wiki", "2WikiMultihopQA", "2wikimultihopqa", ("train", "dev"), "dev", "multi-hop",
        "Apache-2.0", "https://github.com/Alab-NII/2wikimultihop (LICENSE)",
        "2WikiMultihopQA (Ho et al., COLING 2020): Wikipedia + Wikidata multi-hop questions",
        "Wikipedia articles with Wikidata evidence; the papers retrieve from wiki-18",
        {"train": 15000, "dev": 12576}),
    DatasetSpec(
        "musique", "MuSiQue", "musique", ("train", "dev"), "dev", "multi-hop",
        "CC BY 4.0", "https://github.com/StonyBrookNLP/musique (README, LICENSE)",
        "MuSiQue-Ans (Trivedi et al., TACL 2022): 2-4 hop questions composed from single-hop "
        "ones",
        "paragraphs from Wikipedia-based single-hop datasets; the papers retrieve from wiki-18",
        {"train": 19938, "dev": 2417}),
    DatasetSpec(
        "bamboogle", "Bamboogle", "bamboogle", ("test",), "test", "multi-hop",
        "MIT", "https://huggingface.co/datasets/chiayewken/bamboogle (card: \"distributed with "
        "the MIT license\"); the data comes from github.com/ofirpress/self-ask",
        "Bamboogle (Press et al., Findings of EMNLP 2023, self-ask): 125 hand-written 2-hop "
        "questions whose answers Google's first page does not show",
        "written from Wikipedia articles in 2022; FlashRAG retrieves from wiki-18, where a fact "
        "newer than Dec 2018 is missing",
        {"test": 125}),
)}
ALIASES = {
    "ambig_qa": "ambigqa", "ambignq": "ambigqa", "2wikimultihopqa": "2wiki",
    "2wikimultihop": "2wiki", "hotpot": "hotpotqa", "nq_open": "nq", "nq-open": "nq",
    "natural_questions": "nq", "trivia_qa": "triviaqa", "pop_qa": "popqa",
}
# name -> (folder in the hub repository, splits, default split): the registry's older view
BENCHMARKS: dict[str, tuple[str, tuple[str, ...], str]] = {
    k: (s.folder, s.splits, s.default_split) for k, s in REGISTRY.items()}

_ID_FIELDS = ("id", "_id", "qid", "question_id")
_ANSWER_FIELDS = ("golden_answers", "answers", "answer", "answer_aliases")
_SPLIT_NAMES = {"train", "dev", "test", "validation", "val"}


def canonical_name(name: str) -> str | None:
    """The registry key of a benchmark name or alias (case-insensitive), else None."""
    key = name.strip().lower()
    key = ALIASES.get(key, key)
    return key if key in REGISTRY else None


def get_spec(name: str) -> DatasetSpec:
    key = canonical_name(name)
    if key is None:
        raise DatasetError(
            f"{name!r} is neither a file nor a known benchmark ({', '.join(REGISTRY)})")
    return REGISTRY[key]


# ----------------------------------------------------------------------------- quirks


def _meta_of(obj: dict[str, Any]) -> dict[str, Any]:
    return dict(obj["metadata"]) if isinstance(obj.get("metadata"), dict) else {}


def _with_meta(obj: dict[str, Any], meta: dict[str, Any]) -> dict[str, Any]:
    if meta:
        obj["metadata"] = meta
    return obj


def _strings(value: Any, where: str, what: str) -> list[str]:
    """A list of answer strings (numbers become strings); anything else is an error."""
    items = value if isinstance(value, list) else [value]
    out = []
    for a in items:
        if isinstance(a, bool) or not isinstance(a, (str, int, float)):
            raise DatasetError(f"{where}: {what} holds a {type(a).__name__}, expected strings")
        out.append(str(a))
    return out


def _dedup(items: list[str]) -> list[str]:
    out: list[str] = []
    for a in items:
        if a.strip() and a not in out:
            out.append(a)
    return out


def _json_list(text: str, where: str, what: str) -> list[str]:
    """PopQA stores its lists as JSON text inside a string field."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        raise DatasetError(f"{where}: {what} is not a JSON list ({e.msg})") from None
    if not isinstance(value, list):
        raise DatasetError(f"{where}: {what} is JSON but not a list")
    return _strings(value, where, what)


def normalise_popqa(obj: dict[str, Any], where: str) -> dict[str, Any]:
    """PopQA: ``possible_answers`` (and ``s_aliases``/``o_aliases``) are JSON lists written
    as strings, at the top level (the original TSV, the hub copy) or in FlashRAG's metadata.
    They are decoded; ``possible_answers`` gives the golden answers when the record has none."""
    out, meta = dict(obj), _meta_of(obj)
    for container in (out, meta):
        for key in ("possible_answers", "s_aliases", "o_aliases"):
            if isinstance(container.get(key), str):
                container[key] = _json_list(container[key], where, repr(key))
    ga = out.get("golden_answers")
    if isinstance(ga, str):
        out["golden_answers"] = (_json_list(ga, where, "'golden_answers'")
                                 if ga.lstrip().startswith("[") else [ga])
    if not out.get("golden_answers"):
        possible = out.pop("possible_answers", None) or meta.get("possible_answers")
        if possible is not None:
            out["golden_answers"] = possible
    return _with_meta(out, meta)


def _annotations(value: Any, where: str) -> list[dict[str, Any]]:
    """AmbigQA's annotations as a list of ``{"type", "answer"?, "qaPairs"?}``; the hub copy
    (sewon/ambig_qa) stores them column-wise (``{"type": [...], "answer": [...],
    "qaPairs": [{"question": [...], "answer": [...]}, ...]}``)."""
    if isinstance(value, dict):
        try:
            types = value.get("type") or []
            answers = value.get("answer") or [[] for _ in types]
            pairs = value.get("qaPairs") or [{} for _ in types]
            value = [{"type": t, "answer": a,
                      "qaPairs": [{"question": q, "answer": qa}
                                  for q, qa in zip(p.get("question") or [],
                                                   p.get("answer") or [], strict=True)]}
                     for t, a, p in zip(types, answers, pairs, strict=True)]
        except (TypeError, ValueError, AttributeError):
            raise DatasetError(f"{where}: 'annotations' columns do not line up") from None
    if not isinstance(value, list) or not all(isinstance(a, dict) for a in value):
        raise DatasetError(f"{where}: 'annotations' is not a list of objects")
    return value


def normalise_ambigqa(obj: dict[str, Any], where: str) -> dict[str, Any]:
    """AmbigQA: an ambiguous question has several annotations, each a ``singleAnswer`` set or
    ``multipleQAs`` (one disambiguated question-answer pair per reading). Every answer of every
    set is a golden answer (AmbigQA's and FlashRAG's scoring: any acceptable answer counts);
    the sets are kept in ``metadata.answer_sets`` and the pairs in ``metadata.qa_pairs``. A
    ``golden_answers`` given as a list of lists is read the same way; a flat one is kept."""
    out, meta = dict(obj), _meta_of(obj)
    sets: list[list[str]] = []
    pairs: list[dict[str, Any]] = []
    annotations = out.pop("annotations", None)
    if annotations is None:
        annotations = meta.pop("annotations", None)
    for a in _annotations(annotations, where) if annotations is not None else []:
        kind = a.get("type")
        if kind == "singleAnswer":
            sets.append(_dedup(_strings(a.get("answer") or [], where, "an answer set")))
        elif kind == "multipleQAs":
            for p in a.get("qaPairs") or []:
                if not isinstance(p, dict):
                    raise DatasetError(f"{where}: a qaPair is not an object")
                answers = _dedup(_strings(p.get("answer") or [], where, "a qaPair answer"))
                pairs.append({"question": p.get("question"), "answer": answers})
                sets.append(answers)
        else:
            raise DatasetError(f"{where}: annotation type {kind!r} is neither singleAnswer "
                               "nor multipleQAs")
    ga = out.get("golden_answers")
    if isinstance(ga, list) and any(isinstance(x, list) for x in ga):
        nested = [_dedup(_strings(x, where, "an answer set")) for x in ga]
        sets.extend(nested)
        out["golden_answers"] = _dedup([a for s in nested for a in s])
    if not out.get("golden_answers") and sets:
        out["golden_answers"] = _dedup([a for s in sets for a in s])
    if sets:
        meta["answer_sets"] = [s for s in sets if s]
    if pairs:
        meta["qa_pairs"] = pairs
    return _with_meta(out, meta)


# TriviaQA's evidence lists: documents for reading comprehension, not used by open-domain QA
_TRIVIAQA_EVIDENCE = ("EntityPages", "SearchResults", "entity_pages", "search_results")
_TRIVIAQA_ANSWER_KEYS = {"Value", "Aliases", "value", "aliases"}


def _is_triviaqa_answer(value: Any) -> bool:
    return isinstance(value, dict) and bool(_TRIVIAQA_ANSWER_KEYS & value.keys())


def normalise_triviaqa(obj: dict[str, Any], where: str) -> dict[str, Any]:
    """TriviaQA: the answer is an object (``Answer`` with ``Value``/``Aliases`` in the original
    files, ``answer`` with ``value``/``aliases`` on the hub); golden answers are the value and
    its aliases. The original's capitalised keys (``Question``, ``QuestionId``) are read, and
    the evidence lists (entity pages, search results) are dropped."""
    out, meta = dict(obj), _meta_of(obj)
    for src, dst in (("Question", "question"), ("QuestionId", "id"),
                     ("QuestionSource", "question_source")):
        if src in out:
            value = out.pop(src)
            out.setdefault(dst, value)
    answer = out.pop("Answer", None)
    if answer is None and _is_triviaqa_answer(out.get("answer")):
        answer = out.pop("answer")
    if answer is not None:
        if not _is_triviaqa_answer(answer):
            raise DatasetError(f"{where}: 'Answer' is not an object with Value or Aliases")

        def get(key: str) -> Any:  # Value / value, NormalizedAliases / normalized_aliases
            snake = re.sub(r"(?<!^)([A-Z])", r"_\1", key).lower()
            return answer.get(key, answer.get(snake))

        value, aliases = get("Value"), get("Aliases") or []
        answers = _dedup(_strings([value, *aliases] if value is not None else aliases,
                                  where, "'Answer'"))
        if not out.get("golden_answers"):
            out["golden_answers"] = answers
        for key, name in (("Type", "answer_type"), ("MatchedWikiEntityName",
                                                    "matched_wiki_entity_name"),
                          ("NormalizedAliases", "normalized_aliases")):
            if get(key) is not None:
                meta[name] = get(key)
    for key in _TRIVIAQA_EVIDENCE:
        out.pop(key, None)
        meta.pop(key, None)
    return _with_meta(out, meta)


def normalise_bamboogle(obj: dict[str, Any], where: str) -> dict[str, Any]:
    """Bamboogle: the original sheet (and its hub copy) has ``Question``/``Answer`` columns."""
    out = dict(obj)
    for src, dst in (("Question", "question"), ("Answer", "answer")):
        if src in out and dst not in out:
            out[dst] = out.pop(src)
    return out


NORMALISERS: dict[str, Callable[[dict[str, Any], str], dict[str, Any]]] = {
    "popqa": normalise_popqa,
    "ambigqa": normalise_ambigqa,
    "triviaqa": normalise_triviaqa,
    "bamboogle": normalise_bamboogle,
}


def _shape_of(obj: dict[str, Any]) -> str | None:
    """Which dataset's quirks a record of unknown name shows."""
    meta = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
    if "possible_answers" in obj or "possible_answers" in meta:
        return "popqa"
    if "annotations" in obj or "annotations" in meta:
        return "ambigqa"
    if _is_triviaqa_answer(obj.get("Answer")) or _is_triviaqa_answer(obj.get("answer")):
        return "triviaqa"
    ga = obj.get("golden_answers")
    if isinstance(ga, list) and any(isinstance(x, list) for x in ga):
        return "ambigqa"
    if "Question" in obj:
        return "bamboogle"
    return None


def normalise(obj: Any, where: str, dataset: str) -> Any:
    """``obj`` with its dataset's quirks undone: the named dataset's normaliser, or for an
    unknown name the one whose fields the record has. Not an object: returned as is."""
    if not isinstance(obj, dict):
        return obj
    key = canonical_name(dataset) if dataset else None
    fn = NORMALISERS.get(key or "") if key else NORMALISERS.get(_shape_of(obj) or "")
    return fn(obj, where) if fn else obj


# ----------------------------------------------------------------------------- records


def _answers(obj: dict[str, Any], where: str) -> list[str]:
    found: list[str] = []
    seen_field = False
    for name in _ANSWER_FIELDS:
        if name not in obj or obj[name] is None:
            continue
        seen_field = True
        for a in _strings(obj[name], where, repr(name)):
            if a.strip() and a not in found:
                found.append(a)
        if name == "golden_answers":
            break  # FlashRAG's list is already complete; do not mix in its other fields
    if not found:
        what = "empty golden answers" if seen_field else f"no golden answers (none of {list(_ANSWER_FIELDS)})"
        raise DatasetError(f"{where}: {what}")
    return found


def to_question(obj: Any, where: str, fallback_id: str, dataset: str) -> Question:
    """One record in any supported shape (already normalised) -> ``Question``."""
    if not isinstance(obj, dict):
        raise DatasetError(f"{where}: expected a JSON object, got {type(obj).__name__}")
    question = obj.get("question")
    if is_blank(question):
        raise DatasetError(f"{where}: no 'question' text")
    qid: Any = next((obj[f] for f in _ID_FIELDS if obj.get(f) not in (None, "")), fallback_id)
    if isinstance(qid, (dict, list, bool)):
        raise DatasetError(f"{where}: id must be a string or number, got {qid!r}")
    answers = _answers(obj, where)
    used = {"question", "dataset", "metadata", *_ID_FIELDS, *_ANSWER_FIELDS}
    meta = dict(obj["metadata"]) if isinstance(obj.get("metadata"), dict) else {}
    meta.update({k: v for k, v in obj.items() if k not in used})
    name = obj.get("dataset") if isinstance(obj.get("dataset"), str) and obj.get("dataset") else dataset
    return Question(id=str(qid), question=question.strip(), golden_answers=answers, dataset=name,
                    metadata=meta)


@dataclass(frozen=True)
class Problem:
    """A record that could not be read: where (``file:line`` or ``file: item i``) and why."""

    where: str
    message: str

    def __str__(self) -> str:
        return f"{self.where}: {self.message}"


@dataclass
class ParseResult:
    questions: list[Question]
    problems: list[Problem]
    records: int  # records seen (blank lines not counted)


def _table_rows(f: Any, path: Path, delimiter: str) -> Iterator[tuple[str, int, Any]]:
    """TSV/CSV rows with a header line (PopQA's TSV, Bamboogle's sheet); a row with too many
    or too few cells is a Problem."""
    reader = csv.DictReader(f, delimiter=delimiter)
    try:
        if not reader.fieldnames:
            return
        columns = len(reader.fieldnames)
        for index, row in enumerate(reader):
            where = f"{path}:{reader.line_num}"
            if None in row:  # more cells than header names
                yield where, index, Problem(where, f"{columns + len(row[None])} cells for "
                                                   f"{columns} columns")
            elif any(v is None for v in row.values()):
                yield where, index, Problem(where, f"fewer cells than the {columns} columns")
            else:
                yield where, index, dict(row)
    except csv.Error as e:
        raise DatasetError(f"{path}:{reader.line_num}: unreadable table row ({e})") from None


def _records(path: Path) -> Iterator[tuple[str, int, Any]]:
    """``(where, index, object or Problem)`` for each record of a JSONL file, a JSON array
    (or TriviaQA's ``{"Data": [...]}``) or a TSV/CSV file with a header row. A line that is
    not JSON is a Problem and reading goes on; a JSON document that does not parse is an
    error (nothing in it can be read)."""
    stem = path.name.removesuffix(".gz")
    with open_text(path) as f:
        if stem.endswith((".tsv", ".csv")):
            yield from _table_rows(f, path, "\t" if stem.endswith(".tsv") else ",")
            return
        head = ""
        while not head:
            chunk = f.read(1)
            if not chunk:
                return
            head = chunk.strip()
        f.seek(0)
        # a .jsonl file is JSON lines even when a line is an array (that line is then an error)
        if head in "[{" and not stem.endswith(".jsonl"):
            try:
                doc = json.load(f)
            except json.JSONDecodeError as e:
                if head == "[":
                    raise DatasetError(f"{path}:{e.lineno}: invalid JSON ({e.msg})") from None
                doc = None  # not one document: JSON lines in a .json file
            items = doc.get("Data") if isinstance(doc, dict) else doc
            if isinstance(items, list):
                for i, obj in enumerate(items):
                    yield f"{path}: item {i}", i, obj
                return
            f.seek(0)
        index = 0
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            where = f"{path}:{lineno}"
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as e:
                obj = Problem(where, f"invalid JSON ({e.msg})")
            yield where, index, obj
            index += 1


def dataset_name_of(path: Path) -> str:
    """``hotpotqa.questions.jsonl`` -> ``hotpotqa``; ``hotpotqa/dev.jsonl`` -> ``hotpotqa``."""
    stem = path.name.split(".")[0]
    return path.parent.name if stem in _SPLIT_NAMES and path.parent.name else stem


def parse_questions(path: str | os.PathLike[str], dataset: str | None = None) -> ParseResult:
    """Every readable question of a local file, in file order, and a Problem for each record
    that is not (bad JSON, no question, no answers, a duplicate id: the later one), so one
    broken line costs that line only."""
    p = Path(path)
    name = dataset or dataset_name_of(p)
    out: list[Question] = []
    problems: list[Problem] = []
    first_seen: dict[str, str] = {}
    records = 0
    for where, index, obj in _records(p):
        records += 1
        if isinstance(obj, Problem):
            problems.append(obj)
            continue
        try:
            q = to_question(normalise(obj, where, name), where, f"{name}-{index}", name)
        except DatasetError as e:
            problems.append(Problem(where, str(e).removeprefix(f"{where}: ")))
            continue
        except (TypeError, ValueError, KeyError, AttributeError) as e:  # a shape no rule foresaw
            problems.append(Problem(where, f"unreadable record ({type(e).__name__}: {e})"))
            continue
        if q.id in first_seen:
            problems.append(Problem(where, f"duplicate id {q.id!r} (first at {first_seen[q.id]})"))
            continue
        first_seen[q.id] = where
        out.append(q)
    return ParseResult(out, problems, records)


def describe_problems(problems: list[Problem], show: int = 5) -> str:
    lines = [str(p) for p in problems[:show]]
    if len(problems) > show:
        lines.append(f"... and {len(problems) - show} more")
    return "\n".join(lines)


def read_questions(path: str | os.PathLike[str], dataset: str | None = None) -> list[Question]:
    """Every question in a local file, in file order. Any broken record is an error naming its
    file and line (the first, then how many more). Duplicate ids are an error (runs are keyed by
    question id, so a duplicate would be silently skipped on resume)."""
    result = parse_questions(path, dataset)
    if result.problems:
        first, more = result.problems[0], len(result.problems) - 1
        tail = (f" (and {more} more broken record{'s' if more > 1 else ''}:\n"
                f"{describe_problems(result.problems[1:])})" if more else "")
        raise DatasetError(f"{first}{tail}")
    if not result.questions:
        raise DatasetError(f"{Path(path)}: no questions in file")
    return result.questions


# ----------------------------------------------------------------------------- hub


def _truthy(value: str | None) -> bool:
    return (value or "").strip().upper() in {"1", "ON", "YES", "TRUE"}


def hub_offline() -> bool:
    """Offline per the environment now (huggingface_hub reads it only once, at import)."""
    if _truthy(os.environ.get("HF_HUB_OFFLINE")) or _truthy(os.environ.get("TRANSFORMERS_OFFLINE")):
        return True
    try:
        from huggingface_hub import constants
    except ImportError:
        return False
    return bool(constants.HF_HUB_OFFLINE)


def hub_endpoint() -> str:
    return (os.environ.get("HF_ENDPOINT") or DEFAULT_ENDPOINT).rstrip("/")


def hub_cache_dir() -> Path:
    """Where huggingface_hub caches: ``$HF_HUB_CACHE``, else ``$HF_HOME/hub``, else
    ``~/.cache/huggingface/hub``."""
    for var in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        if os.environ.get(var):
            return Path(os.environ[var]).expanduser()
    home = os.environ.get("HF_HOME") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"),
        "huggingface")
    return Path(home).expanduser() / "hub"


def resolve_url(repo: str, filename: str, revision: str, endpoint: str | None = None) -> str:
    return f"{endpoint or hub_endpoint()}/datasets/{repo}/resolve/{revision}/{filename}"


def resolve_benchmark(name: str, split: str | None) -> tuple[str, str, str]:
    """``(canonical name, split, file path in the hub repository)``."""
    spec = get_spec(name)
    split = split or spec.default_split
    if split not in spec.splits:
        raise DatasetError(f"benchmark {spec.name!r} has no split {split!r} "
                           f"(available: {', '.join(spec.splits)})")
    return spec.name, split, spec.path_in_repo(split)


@dataclass(frozen=True)
class HubFile:
    path: Path  # the cached file
    repo: str
    filename: str  # path in the repository
    revision: str  # as asked
    commit: str | None  # the commit it came from, when known
    url: str


_SHA = re.compile(r"[0-9a-f]{40}")


def _cache_root(cache: Path, repo: str) -> Path:
    return cache / f"datasets--{repo.replace('/', '--')}"


def _cached(cache: Path, repo: str, filename: str, revision: str) -> tuple[Path, str] | None:
    """The file in huggingface_hub's cache layout (``snapshots/<commit>/<filename>``; a
    branch name through ``refs/<branch>``), if there."""
    root = _cache_root(cache, repo)
    commit = revision if _SHA.fullmatch(revision) else None
    if commit is None and (root / "refs" / revision).is_file():
        commit = (root / "refs" / revision).read_text().strip()
    if commit and (root / "snapshots" / commit / filename).is_file():
        return root / "snapshots" / commit / filename, commit
    return None


def _http_download(cache: Path, repo: str, filename: str, revision: str, url: str) -> tuple[Path, str]:
    """Plain HTTPS from the resolve URL into huggingface_hub's cache layout (used where
    huggingface_hub is not installed). The commit comes from the hub's ``X-Repo-Commit``; a
    pinned revision answered with another commit is refused."""
    import tempfile

    import httpx

    root = _cache_root(cache, repo)
    with httpx.stream("GET", url, follow_redirects=True, timeout=httpx.Timeout(30.0, read=120.0),
                      headers={"user-agent": "marag"}) as r:
        if r.status_code != 200:
            raise DatasetError(f"HTTP {r.status_code} for {url}")
        commits = {h.headers.get("x-repo-commit") for h in (*r.history, r)} - {None}
        commit = revision if _SHA.fullmatch(revision) else None
        if commit and commits and commits != {commit}:
            raise DatasetError(f"the hub answered commit {', '.join(sorted(commits))} for "
                               f"revision {commit}")
        commit = commit or (next(iter(commits)) if len(commits) == 1 else None)
        if not commit:
            raise DatasetError(f"the hub named no single commit for revision {revision!r} "
                               "(X-Repo-Commit); pass a commit sha")
        target = root / "snapshots" / commit / filename
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".part")
        try:
            with os.fdopen(fd, "wb") as out:
                for chunk in r.iter_bytes(1 << 20):
                    out.write(chunk)
            os.replace(tmp, target)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
    if commit != revision:
        (root / "refs").mkdir(parents=True, exist_ok=True)
        (root / "refs" / revision).write_text(commit)
    return target, commit


def _hf_download(repo: str, filename: str, revision: str, cache: Path, endpoint: str,
                 offline: bool) -> Path:
    from huggingface_hub import hf_hub_download

    kwargs: dict[str, Any] = {"repo_type": "dataset", "revision": revision,
                              "cache_dir": str(cache), "endpoint": endpoint}
    try:
        return Path(hf_hub_download(repo, filename, local_files_only=True, **kwargs))
    except Exception as e:  # noqa: BLE001 - not cached (the hub raises several types for that)
        log.debug("%s not cached: %s", filename, e)
    return Path(hf_hub_download(repo, filename, local_files_only=offline, **kwargs))


def fetch_hub_file(repo: str, filename: str, revision: str, *,
                   cache_dir: str | os.PathLike[str] | None = None, what: str = "",
                   hint: str = "") -> HubFile:
    """A file of a hub dataset repository at ``revision``, from the cache or downloaded into
    it: through ``huggingface_hub.hf_hub_download`` when installed, else plain HTTPS from the
    resolve URL into the same cache layout. ``HF_ENDPOINT`` picks the hub (a mirror),
    ``HF_HUB_OFFLINE=1`` allows the cache only, ``HF_HUB_CACHE``/``cache_dir`` the cache."""
    cache = Path(cache_dir).expanduser() if cache_dir else hub_cache_dir()
    endpoint, offline = hub_endpoint(), hub_offline()
    url = resolve_url(repo, filename, revision, endpoint)
    # A cached copy is used as is: files at a commit do not change, and asking the hub first
    # would cost a network round trip (and, with the hub unreachable, its retries) per load.
    hit = _cached(cache, repo, filename, revision)
    if hit:
        return HubFile(hit[0], repo, filename, revision, hit[1], url)
    try:
        try:
            import huggingface_hub  # noqa: F401
        except ImportError:
            if offline:
                raise DatasetError("not in the cache") from None
            path, commit = _http_download(cache, repo, filename, revision, url)
            return HubFile(path, repo, filename, revision, commit, url)
        path = _hf_download(repo, filename, revision, cache, endpoint, offline)
    except Exception as e:  # the hub raises many types (offline, HTTP, connection, missing entry)
        why = ("offline mode (HF_HUB_OFFLINE) and not in the cache" if offline else
               f"could not download it from {url} ({type(e).__name__}: "
               f"{str(e).splitlines()[0][:200] if str(e) else ''})")
        what = what or f"{repo}/{filename} at {revision[:12]}"
        raise DatasetUnavailable(f"{what}: {why}{'; ' + hint if hint else ''}") from e
    snapshot = path.parents[len(filename.split("/")) - 1].name  # snapshots/<commit>/<filename>
    return HubFile(path, repo, filename, revision, snapshot if _SHA.fullmatch(snapshot) else None,
                   url)


def download_benchmark(name: str, split: str | None = None, *, revision: str | None = None,
                       cache_dir: str | os.PathLike[str] | None = None) -> Path:
    """The local path of a named benchmark file at its pinned revision, downloading it into
    the HF cache if needed."""
    return benchmark_file(name, split, revision=revision, cache_dir=cache_dir).path


def benchmark_file(name: str, split: str | None = None, *, revision: str | None = None,
                   cache_dir: str | os.PathLike[str] | None = None,
                   hint: str | None = None) -> HubFile:
    key, split, filename = resolve_benchmark(name, split)
    spec = REGISTRY[key]
    if hint is None:
        hint = (f"pass a local file instead, e.g. --dataset path/to/{key}_{split}.jsonl "
                f"(FlashRAG format: one {{\"id\", \"question\", \"golden_answers\"}} object "
                "per line)")
    revision = revision or spec.revision
    return fetch_hub_file(spec.repo, filename, revision, cache_dir=cache_dir, hint=hint,
                          what=f"benchmark {key!r} ({spec.repo}/{filename} at {revision[:12]})")


# ----------------------------------------------------------------------------- marag data get


@dataclass
class Fetched:
    """What ``get_dataset`` wrote: the normalised file, its provenance, the broken records."""

    spec: DatasetSpec
    split: str
    hub: HubFile
    sha256: str  # of the file as the hub serves it
    questions: int
    records: int
    problems: list[Problem]
    out: Path | None  # the questions file written (None: refused, see problems)
    provenance: Path | None


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _write_text_atomic(path: Path, text: str) -> None:
    import tempfile

    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".part")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def flashrag_record(q: Question) -> dict[str, Any]:
    """A question in FlashRAG's shape: ``{"id", "question", "golden_answers", "metadata"}``."""
    return {"id": q.id, "question": q.question, "golden_answers": list(q.golden_answers),
            "metadata": q.metadata}


def get_dataset(name: str, split: str | None, out_dir: str | os.PathLike[str], *,
                revision: str | None = None, cache_dir: str | os.PathLike[str] | None = None,
                strict: bool = False) -> Fetched:
    """Fetch a named benchmark at its pinned revision (``revision`` overrides), normalise and
    validate every record, and write ``OUT/<folder>/<split>.jsonl`` in FlashRAG's format (the
    layout ``marag table --data OUT`` and ``load_questions(OUT/<folder>)`` read) with
    ``<split>.provenance.json`` beside it: repository, revision and commit, URL, sha256,
    licence, source, counts and every broken record with its line. A broken record costs that
    record only, unless ``strict``: then nothing is written."""
    spec = get_spec(name)
    _, split, filename = resolve_benchmark(spec.name, split)
    hub = benchmark_file(spec.name, split, revision=revision, cache_dir=cache_dir,
                         hint="point HF_ENDPOINT at a hub mirror, or run `marag data get` where "
                              "the hub is reachable and copy the cache (HF_HUB_CACHE) or the "
                              "data folder")
    result = parse_questions(hub.path, spec.name)
    raw = str(hub.path)
    problems = [Problem(p.where.replace(raw, filename, 1), p.message) for p in result.problems]
    fetched = Fetched(spec, split, hub, _sha256(hub.path), len(result.questions), result.records,
                      problems, None, None)
    if (strict and problems) or not result.questions:
        return fetched
    folder = Path(out_dir) / spec.folder
    out = folder / f"{split}.jsonl"
    _write_text_atomic(out, "".join(json.dumps(flashrag_record(q), ensure_ascii=False) + "\n"
                                    for q in result.questions))
    provenance = {
        "dataset": spec.name, "title": spec.title, "split": split, "file": out.name,
        "repo": spec.repo, "path_in_repo": filename, "revision": hub.revision,
        "commit": hub.commit, "url": hub.url, "sha256": fetched.sha256,
        "bytes": hub.path.stat().st_size,
        "licence": spec.licence, "licence_source": spec.licence_source,
        "collection_licence": FLASHRAG_LICENCE, "source": spec.source, "corpus": spec.corpus,
        "records": result.records, "questions": len(result.questions),
        "stated_questions": spec.sizes.get(split),
        "broken": [{"where": p.where, "message": p.message} for p in problems],
    }
    prov = folder / f"{split}.provenance.json"
    _write_text_atomic(prov, json.dumps(provenance, indent=1, ensure_ascii=False) + "\n")
    fetched.out, fetched.provenance = out, prov
    return fetched


# ----------------------------------------------------------------------------- entry point


def sample(questions: list[Question], limit: int | None, seed: int = 0) -> list[Question]:
    """The first ``limit`` questions ranked by ``sha256(seed:id)``; all, in file order, when
    ``limit`` is None."""
    if limit is None:
        return list(questions)
    if limit < 1:
        raise DatasetError(f"limit must be at least 1, got {limit}")

    def rank(q: Question) -> bytes:
        return hashlib.sha256(f"{seed}:{q.id}".encode()).digest()

    return sorted(questions, key=rank)[:limit]


def load_questions(path_or_name: str | os.PathLike[str], *, limit: int | None = None, seed: int = 0,
                   split: str | None = None) -> list[Question]:
    """Questions from a local file (or a directory holding ``<split>.jsonl``) or a named
    benchmark, optionally a seeded sample of ``limit`` of them."""
    p = Path(path_or_name)
    if p.is_dir():
        candidates = [split] if split else ["test", "dev"]
        for s in candidates:
            for ext in (".jsonl", ".jsonl.gz", ".json"):
                if (p / f"{s}{ext}").is_file():
                    return sample(read_questions(p / f"{s}{ext}", p.name), limit, seed)
        raise DatasetError(f"{p}: no {' or '.join(c + '.jsonl' for c in candidates)} in this directory")
    if p.is_file():
        return sample(read_questions(p), limit, seed)
    name = str(path_or_name)
    if os.sep in name or name.endswith((".jsonl", ".json", ".gz", ".tsv", ".csv")):
        raise FileNotFoundError(f"dataset file not found: {name}")
    key, split, _ = resolve_benchmark(name, split)
    return sample(read_questions(download_benchmark(key, split), key), limit, seed)
