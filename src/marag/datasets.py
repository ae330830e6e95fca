"""Benchmark questions: local files in the common QA shapes, or FlashRAG's copies on the HF hub.

``load_questions(path_or_name)`` accepts

- a local file (``.jsonl``, ``.json`` array, either gzipped) whose records are in FlashRAG's
  shape ``{"id", "question", "golden_answers", ...}`` or an original dataset's: HotpotQA and
  2WikiMultihopQA (``_id``, ``question``, ``answer``), MuSiQue (``id``, ``question``,
  ``answer``, ``answer_aliases``), NQ-open (``question``, ``answer``/``answers`` list).
  Fields that are not the id, question or answers are kept in ``Question.metadata``.
- a benchmark name (``nq``, ``popqa``, ``ambigqa``, ``hotpotqa``, ``2wiki``, ``musique``,
  ``bamboogle``), fetched from the ``RUC-NLPIR/FlashRAG_datasets`` dataset repository into the
  Hugging Face cache (offline: from the cache only).

A record without a question or without golden answers, or a line that is not JSON, is an
error naming the file and line: a benchmark silently missing items would skew every number.

``limit`` draws a seeded sample: items are ranked by a hash of ``(seed, id)`` and the first
``limit`` are taken, so the same seed gives the same items on every machine and Python
version, and a smaller limit is a prefix of a larger one.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from marag.types import Question, is_blank, json_lines, open_text

log = logging.getLogger(__name__)

HUB_REPO = "RUC-NLPIR/FlashRAG_datasets"

# name -> (folder in the hub repository, available splits, default split). The multi-hop sets
# have no public test answers, so their dev split is what the papers report on.
BENCHMARKS: dict[str, tuple[str, tuple[str, ...], str]] = {
    "nq": ("nq", ("train", "dev", "test"), "test"),
    "popqa": ("popqa", ("test",), "test"),
    "ambigqa": ("ambig_qa", ("train", "dev"), "dev"),
    "hotpotqa": ("hotpotqa", ("train", "dev"), "dev"),
    "2wiki": ("2wikimultihopqa", ("train", "dev"), "dev"),
    "musique": ("musique", ("train", "dev"), "dev"),
    "bamboogle": ("bamboogle", ("test",), "test"),
}
ALIASES = {"ambig_qa": "ambigqa", "2wikimultihopqa": "2wiki", "hotpot": "hotpotqa"}

_ID_FIELDS = ("id", "_id", "qid", "question_id")
_ANSWER_FIELDS = ("golden_answers", "answers", "answer", "answer_aliases")
_SPLIT_NAMES = {"train", "dev", "test", "validation", "val"}


class DatasetError(ValueError):
    """A dataset that cannot be loaded as asked: bad record, unknown name or split."""


class DatasetUnavailable(DatasetError):
    """A named benchmark that is neither cached nor downloadable right now."""


# ----------------------------------------------------------------------------- records


def _answers(obj: dict[str, Any], where: str) -> list[str]:
    found: list[str] = []
    seen_field = False
    for name in _ANSWER_FIELDS:
        if name not in obj or obj[name] is None:
            continue
        seen_field = True
        value = obj[name]
        items = value if isinstance(value, list) else [value]
        for a in items:
            if isinstance(a, bool) or not isinstance(a, (str, int, float)):
                raise DatasetError(f"{where}: {name!r} holds a {type(a).__name__}, expected strings")
            a = str(a)
            if a.strip() and a not in found:
                found.append(a)
        if name == "golden_answers":
            break  # FlashRAG's list is already complete; do not mix in its other fields
    if not found:
        what = "empty golden answers" if seen_field else f"no golden answers (none of {list(_ANSWER_FIELDS)})"
        raise DatasetError(f"{where}: {what}")
    return found


def to_question(obj: Any, where: str, fallback_id: str, dataset: str) -> Question:
    """One record in any supported shape -> ``Question``."""
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


def _records(path: Path) -> Iterator[tuple[str, int, Any]]:
    """``(where, index, object)`` for each record of a JSONL file or a JSON array."""
    with open_text(path) as f:
        head = ""
        while not head:
            chunk = f.read(1)
            if not chunk:
                return
            head = chunk.strip()
        f.seek(0)
        # a .jsonl file is JSON lines even when a line is an array (that line is then an error)
        is_jsonl = path.name.endswith((".jsonl", ".jsonl.gz"))
        if head == "[" and not is_jsonl:
            try:
                items = json.load(f)
            except json.JSONDecodeError as e:
                raise DatasetError(f"{path}:{e.lineno}: invalid JSON ({e.msg})") from None
            for i, obj in enumerate(items):
                yield f"{path}: item {i}", i, obj
            return
        for index, (lineno, obj) in enumerate(json_lines(f, path, DatasetError)):
            yield f"{path}:{lineno}", index, obj


def dataset_name_of(path: Path) -> str:
    """``hotpotqa.questions.jsonl`` -> ``hotpotqa``; ``hotpotqa/dev.jsonl`` -> ``hotpotqa``."""
    stem = path.name.split(".")[0]
    return path.parent.name if stem in _SPLIT_NAMES and path.parent.name else stem


def read_questions(path: str | os.PathLike[str], dataset: str | None = None) -> list[Question]:
    """Every question in a local file, in file order. Duplicate ids are an error (runs are
    keyed by question id, so a duplicate would be silently skipped on resume)."""
    p = Path(path)
    name = dataset or dataset_name_of(p)
    out: list[Question] = []
    first_seen: dict[str, str] = {}
    for where, index, obj in _records(p):
        q = to_question(obj, where, f"{name}-{index}", name)
        if q.id in first_seen:
            raise DatasetError(f"{where}: duplicate id {q.id!r} (first at {first_seen[q.id]})")
        first_seen[q.id] = where
        out.append(q)
    if not out:
        raise DatasetError(f"{p}: no questions in file")
    return out


# ----------------------------------------------------------------------------- hub


def _truthy(value: str | None) -> bool:
    return (value or "").strip().upper() in {"1", "ON", "YES", "TRUE"}


def hub_offline() -> bool:
    """Offline per the environment now (huggingface_hub reads it only once, at import)."""
    if _truthy(os.environ.get("HF_HUB_OFFLINE")) or _truthy(os.environ.get("TRANSFORMERS_OFFLINE")):
        return True
    from huggingface_hub import constants

    return bool(constants.HF_HUB_OFFLINE)


def resolve_benchmark(name: str, split: str | None) -> tuple[str, str, str]:
    """``(canonical name, split, file path in the hub repository)``."""
    key = ALIASES.get(name.lower(), name.lower())
    if key not in BENCHMARKS:
        raise DatasetError(
            f"{name!r} is neither a file nor a known benchmark ({', '.join(BENCHMARKS)})"
        )
    folder, splits, default = BENCHMARKS[key]
    split = split or default
    if split not in splits:
        raise DatasetError(f"benchmark {key!r} has no split {split!r} (available: {', '.join(splits)})")
    return key, split, f"{folder}/{split}.jsonl"


def download_benchmark(name: str, split: str | None = None) -> Path:
    """The local path of a named benchmark file, downloading it into the HF cache if needed."""
    key, split, filename = resolve_benchmark(name, split)
    from huggingface_hub import hf_hub_download

    offline = hub_offline()
    hint = (f"pass a local file instead, e.g. --dataset path/to/{key}_{split}.jsonl "
            f"(FlashRAG format: one {{\"id\", \"question\", \"golden_answers\"}} object per line)")
    kwargs: dict[str, Any] = {
        "repo_type": "dataset",
        "cache_dir": os.environ.get("HF_HUB_CACHE") or None,
        "endpoint": os.environ.get("HF_ENDPOINT") or None,
    }
    # A cached copy is used as is: benchmark files do not change, and asking the hub first would
    # cost a network round trip (and, with the hub unreachable, its retries: ~20 s) per load.
    try:
        return Path(hf_hub_download(HUB_REPO, filename, local_files_only=True, **kwargs))
    except Exception as e:  # noqa: BLE001 - not cached (the hub raises several types for that)
        log.debug("benchmark %s not cached: %s", filename, e)
    try:
        path = hf_hub_download(HUB_REPO, filename, local_files_only=offline, **kwargs)
    except Exception as e:  # the hub raises many types (offline, HTTP, connection, missing entry)
        why = "offline mode (HF_HUB_OFFLINE) and not in the cache" if offline else \
            f"could not download it ({type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''})"
        raise DatasetUnavailable(f"benchmark {key!r} ({HUB_REPO}/{filename}): {why}; {hint}") from e
    return Path(path)


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
    if os.sep in name or name.endswith((".jsonl", ".json", ".gz")):
        raise FileNotFoundError(f"dataset file not found: {name}")
    key, split, _ = resolve_benchmark(name, split)
    return sample(read_questions(download_benchmark(key, split), key), limit, seed)
