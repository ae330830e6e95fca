"""The records that flow through marag: questions, passages, completions, steps and traces.

Every stage (ask, evaluate, report, train, serve) reads and writes these same records, so a
completion is parsed once, by the role that produced it, and never again downstream.
Records are plain dataclasses (cheap to build on the hot path) with ``to_dict``/``from_dict``
and JSONL helpers that round-trip exactly.
"""

from __future__ import annotations

import dataclasses
import gzip
import io
import json
import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, TypeVar

T = TypeVar("T")


# What every surface says to a blank question: the CLI, ask(), POST /api/ask and its stream,
# the dataset loader and the workflow engine.
EMPTY_QUESTION = "the question is empty; give the question to answer"
# A question needs one character that is not blank. Blank is Python's whitespace
# (str.isspace) and the byte-order mark, which JavaScript's \s counts; the class is spelt out
# because JSON Schema's regex dialect (ECMA) and Python's disagree on \s (U+0085, U+001C-1F,
# U+FEFF), and POST /api/ask documents this pattern.
QUESTION_PATTERN = (r"[^\t\n\u000b\f\r\u001c-\u001f \u0085\u00a0\u1680\u2000-\u200a"
                    r"\u2028\u2029\u202f\u205f\u3000\ufeff]")
_NOT_BLANK = re.compile(QUESTION_PATTERN)


def is_blank(question: object) -> bool:
    """True when ``question`` is not text or has no character outside QUESTION_PATTERN's
    blanks: what every surface refuses with EMPTY_QUESTION."""
    return not isinstance(question, str) or _NOT_BLANK.search(question) is None


@dataclass(slots=True)
class Question:
    id: str
    question: str
    golden_answers: list[str] = field(default_factory=list)
    dataset: str = ""
    metadata: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return _plain(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Question:
        return _build(cls, d)


@dataclass(slots=True)
class Passage:
    id: str
    title: str
    text: str

    @property
    def contents(self) -> str:
        """The FlashRAG / Search-R1 form: a quoted title line, then the text."""
        return f'"{self.title}"\n{self.text}'

    def to_dict(self) -> dict[str, Any]:
        return _plain(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Passage:
        return _build(cls, d)


@dataclass(slots=True)
class Hits:
    """Ranked retrieval result for one query (best first)."""

    query: str
    passages: list[Passage] = field(default_factory=list)
    scores: list[float] = field(default_factory=list)

    @property
    def ids(self) -> list[str]:
        return [p.id for p in self.passages]

    def to_dict(self) -> dict[str, Any]:
        return _plain(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Hits:
        return cls(
            query=d["query"],
            passages=[Passage.from_dict(p) for p in d.get("passages", [])],
            scores=[float(s) for s in d.get("scores", [])],
        )


@dataclass(slots=True)
class Completion:
    """One LLM answer. Token ids and logprobs are filled when the backend can return them."""

    text: str
    finish_reason: str = "stop"
    prompt_tokens: int = 0
    completion_tokens: int = 0
    prompt_token_ids: list[int] | None = None
    token_ids: list[int] | None = None
    logprobs: list[float] | None = None
    model: str = ""
    latency: float = 0.0
    # which weights produced it (a trainable local policy counts its updates; None elsewhere)
    weights_version: int | None = None
    # per generated token, when the backend was asked for alternatives (the openai backend's
    # ``top_logprobs``): ``{"token": the sampled token's text, "top": {token text: logprob}}``
    top_logprobs: list[dict[str, Any]] | None = None

    def to_dict(self) -> dict[str, Any]:
        return _plain(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Completion:
        return _build(cls, d)


@dataclass(slots=True)
class Step:
    """One thing an agent did: an LLM call (with its parse) or a retrieval.

    ``parsed`` holds what the role's parser extracted (any JSON value); ``valid`` says whether
    the output honoured the role's format contract and ``reason`` says why not.
    """

    role: str
    node_id: int = 0
    round: int = 0
    messages: list[dict[str, str]] = field(default_factory=list)
    raw: str = ""
    parsed: Any = None
    valid: bool = True
    reason: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    prompt_token_ids: list[int] | None = None
    token_ids: list[int] | None = None
    logprobs: list[float] | None = None
    doc_ids: list[str] = field(default_factory=list)
    latency: float = 0.0
    started: float = 0.0
    backend: str = ""
    model: str = ""
    turn: int = 0
    reward: float | None = None
    # how the completion was drawn: temperature, top_p, seed, and allowed_text when decoding
    # was restricted (logprobs are then renormalised over those tokens); training recomputes
    # logprobs under exactly these settings
    sampling: dict[str, Any] | None = None
    weights_version: int | None = None
    # the completion's per-token alternatives (``Completion.top_logprobs``), when the backend
    # gave them; a workflow that reads them may keep only what it used (Self-RAG)
    top_logprobs: list[dict[str, Any]] | None = None

    @property
    def is_llm(self) -> bool:
        return bool(self.messages)

    def to_dict(self) -> dict[str, Any]:
        return _plain(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Step:
        return _build(cls, d)


@dataclass(slots=True)
class Node:
    """A (sub-)question in the execution tree: JADE's <sub-question, answer, parent, kind>."""

    id: int
    question: str
    answer: str | None = None
    parent: int | None = None
    kind: str = "root"  # root | serial | parallel
    depth: int = 0
    workflow: list[str] | None = None
    children: list[int] = field(default_factory=list)
    solved: bool = False
    # the search query a guarded serial rewrite left for this node (method.serial_rewrite:
    # guarded): its solving workflow retrieves with it and shows it to DS and AG
    query: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return _plain(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Node:
        return _build(cls, d)


@dataclass(slots=True)
class Cost:
    llm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    retrieval_calls: int = 0
    rounds: int = 0
    turns: int = 0  # the method's paper's own turn count (marag.workflows.turns)
    seconds: float = 0.0
    money: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return _plain(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Cost:
        return _build(cls, d)


@dataclass(slots=True)
class Trace:
    """Everything that happened while one method answered one question."""

    id: str
    question: str
    method: str
    golden_answers: list[str] = field(default_factory=list)
    dataset: str = ""
    sample: int = 0  # which of several runs of the same question (GRPO groups, best-of-n)
    nodes: list[Node] = field(default_factory=list)
    steps: list[Step] = field(default_factory=list)
    answer: str | None = None
    status: str = "ok"  # ok | budget | failed
    error: str | None = None
    notes: list[str] = field(default_factory=list)
    metrics: dict[str, float] = field(default_factory=dict)
    cost: Cost = field(default_factory=Cost)

    @classmethod
    def from_question(cls, question: Question, method: str, **fields: Any) -> Trace:
        """A fresh trace of ``method`` on ``question`` (id, text, golden answers and dataset)."""
        return cls(id=question.id, question=question.question, method=method,
                   golden_answers=list(question.golden_answers), dataset=question.dataset,
                   **fields)

    def to_dict(self) -> dict[str, Any]:
        return _plain(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Trace:
        d = dict(d)
        nodes = [Node.from_dict(n) for n in d.pop("nodes", [])]
        steps = [Step.from_dict(s) for s in d.pop("steps", [])]
        cost = Cost.from_dict(d.pop("cost", {}) or {})
        trace = _build(cls, d)
        trace.nodes, trace.steps, trace.cost = nodes, steps, cost
        return trace


def _plain(obj: Any) -> dict[str, Any]:
    # dataclasses.asdict deep-copies every value; a shallow walk is several times faster and
    # the records only nest dataclasses, lists and dicts.
    return {f.name: _to_json(getattr(obj, f.name)) for f in dataclasses.fields(obj)}


def _to_json(v: Any) -> Any:
    if dataclasses.is_dataclass(v) and not isinstance(v, type):
        return _plain(v)
    if isinstance(v, (list, tuple)):
        return [_to_json(x) for x in v]
    if isinstance(v, dict):
        return {str(k): _to_json(x) for k, x in v.items()}
    return v


def _build(cls: type[T], d: dict[str, Any]) -> T:
    names = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    unknown = set(d) - names
    if unknown:
        raise ValueError(f"{cls.__name__}: unknown field(s) {sorted(unknown)}")
    return cls(**d)


# ----------------------------------------------------------------------------- JSONL


def open_text(path: str | os.PathLike[str], mode: str = "r") -> IO[str]:
    """Open a text file, transparently gunzipping ``*.gz``.

    Reading also looks at the bytes, not only the name: gzip data is gunzipped whatever the
    file is called, and a tar archive (plain or gzipped: Search-R1's ``wiki-18.jsonl.gz`` is
    one) is read as its first regular member.
    """
    p = str(path)
    if "r" not in mode:
        if p.endswith(".gz"):
            return gzip.open(p, mode + "t", encoding="utf-8")  # type: ignore[return-value]
        return open(p, mode, encoding="utf-8")
    return io.TextIOWrapper(open_payload(p), encoding="utf-8")


GZIP_MAGIC = b"\x1f\x8b"
TAR_MAGIC_AT, TAR_MAGIC = 257, b"ustar"


def sniff(path: str | os.PathLike[str]) -> str:
    """``"tar"``, ``"gzip"`` or ``"plain"``: what a file's bytes are, whatever its name."""
    with open(path, "rb") as f:
        head = f.read(2)
        f.seek(0)
        gz = head == GZIP_MAGIC
        stream: IO[bytes] = gzip.GzipFile(fileobj=f) if gz else f  # type: ignore[assignment]
        try:
            block = stream.read(512)
        except (OSError, EOFError):
            block = b""
    if block[TAR_MAGIC_AT : TAR_MAGIC_AT + len(TAR_MAGIC)] == TAR_MAGIC:
        return "tar"
    return "gzip" if gz else "plain"


class _TarMember(io.RawIOBase):
    """The first regular member of a tar archive, read as a stream (no seeking); closing it
    closes the archive."""

    def __init__(self, path: str) -> None:
        import tarfile

        self._tar = tarfile.open(path, mode="r|*")  # noqa: SIM115 - a stream, closed by close()
        for member in self._tar:
            if member.isfile():
                self._raw = self._tar.extractfile(member)
                self.member = member.name
                return
        self._tar.close()
        raise ValueError(f"{path}: tar archive holds no regular file")

    def readable(self) -> bool:
        return True

    def readinto(self, buf: Any) -> int:
        data = self._raw.read(len(buf))  # type: ignore[union-attr]
        buf[: len(data)] = data
        return len(data)

    def close(self) -> None:
        if not self.closed:
            self._tar.close()
        super().close()


def open_payload(path: str | os.PathLike[str]) -> IO[bytes]:
    """A binary stream of a data file's content: gunzipped, or a tar's first member."""
    p = str(path)
    kind = sniff(p)
    if kind == "tar":
        return io.BufferedReader(_TarMember(p), 1 << 20)
    if kind == "gzip":
        return gzip.open(p, "rb")
    return open(p, "rb")


def json_lines(lines: Iterable[str], path: str | os.PathLike[str],
               error: type[ValueError] = ValueError) -> Iterator[tuple[int, Any]]:
    """Yield ``(line_number, value)`` for each non-blank line of ``lines`` (read from
    ``path``); a malformed line raises ``error`` naming file and line."""
    for lineno, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            raise error(f"{path}:{lineno}: invalid JSON ({e.msg})") from None
        yield lineno, obj


def iter_jsonl(path: str | os.PathLike[str]) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield ``(line_number, object)``; a malformed line raises ValueError naming file and line."""
    with open_text(path) as f:
        for lineno, obj in json_lines(f, path):
            if not isinstance(obj, dict):
                raise ValueError(f"{path}:{lineno}: expected a JSON object, got {type(obj).__name__}")
            yield lineno, obj


def read_jsonl(path: str | os.PathLike[str], cls: type[T]) -> list[T]:
    out = []
    for lineno, obj in iter_jsonl(path):
        try:
            out.append(cls.from_dict(obj))  # type: ignore[attr-defined]
        except (TypeError, ValueError, KeyError) as e:
            raise ValueError(f"{path}:{lineno}: not a valid {cls.__name__}: {e}") from None
    return out


def dumps(record: Any) -> str:
    d = record.to_dict() if hasattr(record, "to_dict") else record
    return json.dumps(d, ensure_ascii=False)


def write_jsonl(path: str | os.PathLike[str], records: Iterable[Any]) -> int:
    n = 0
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    with open_text(path, "w") as f:
        for r in records:
            f.write(dumps(r) + "\n")
            n += 1
    return n


def append_jsonl(path: str | os.PathLike[str], record: Any) -> None:
    """Append one record and flush it to disk, so a crash loses at most the line in flight."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as f:
        f.write(dumps(record) + "\n")
        f.flush()
        os.fsync(f.fileno())
