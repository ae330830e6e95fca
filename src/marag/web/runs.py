"""Read-only access to the run directories under one root (``marag serve --runs DIR``).

Two kinds of run are direct children of the root: an **evaluation run** holds
``traces.jsonl`` (written by ``marag eval``) and a **training run** holds ``metrics.jsonl``
(written by ``marag train``: one row per iteration). A training run's checkpoint evaluations
(``<run>/eval/iter-NNNNNN/``, evaluation runs themselves) are reachable as
``<run>@iter-NNNNNN``. Names are checked against a strict pattern and the resolved path
(symlinks followed) must stay inside the root, so no request can read elsewhere. A run still
being written is readable: a torn last line is skipped and the file is never modified here.
Parsed traces are cached per file size and modification time, so paging through a large run
parses it once.
"""

from __future__ import annotations

import json
import logging
import math
import re
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from marag.eval.load import RunData, load_run
from marag.eval.rundir import CONFIG, MANIFEST, METRICS, TRACES
from marag.eval.summary import score_trace
from marag.report.training import metrics_rows
from marag.types import Trace

log = logging.getLogger(__name__)

PART = r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}"
NAME = re.compile(rf"{PART}(@{PART})?")  # run, or training run @ checkpoint evaluation
PLOT = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}\.(png|svg|jpg|jpeg)")
PLOT_DIRS = ("plots", ".")
FILTERS = ("all", "correct", "incorrect", "failed")
CACHED_RUNS = 8
TRAIN_METRICS = "metrics.jsonl"  # a training run's rows, one per iteration
EVALS = "eval"                   # its checkpoint evaluations, one folder per iteration
BEST = ("best", "best.json")     # the best checkpoint's record


class RunNotFound(LookupError):
    """No such run (or plot, or trace), or a name that is not allowed."""


def outcome(trace: Trace) -> str:
    """``failed`` (the workflow broke), ``correct`` (exact match with a golden answer) or
    ``incorrect``; answers are re-scored, as in ``metrics.json``."""
    if trace.status == "failed":
        return "failed"
    return "correct" if score_trace(trace)["em"] >= 1.0 else "incorrect"


def trace_row(index: int, t: Trace) -> dict[str, Any]:
    """What a list of a run's questions shows; the full trace is fetched on demand."""
    return {"index": index, "id": t.id, "question": t.question, "answer": t.answer,
            "golden_answers": t.golden_answers, "status": t.status, "outcome": outcome(t),
            "metrics": score_trace(t), "method": t.method, "dataset": t.dataset,
            "cost": t.cost.to_dict(), "steps": len(t.steps), "nodes": len(t.nodes)}


@dataclass
class _Cached:
    stamp: tuple[int, int]
    data: RunData
    by_id: dict[str, int]


class RunStore:
    def __init__(self, root: str | Path | None) -> None:
        self.root = None if root is None else Path(root).resolve()
        self._cache: dict[Path, _Cached] = {}
        self._lock = threading.Lock()  # handlers run in a thread pool

    # ----------------------------------------------------------------- paths

    def locate(self, name: str) -> tuple[Path, str]:
        """The folder of run ``name`` and its kind, ``eval`` or ``train``."""
        if self.root is None:
            raise RunNotFound("this server was started without --runs")
        if not NAME.fullmatch(name):
            raise RunNotFound(f"invalid run name {name!r}")
        top, _, evaluation = name.partition("@")
        p = (self.root / top).resolve()
        if p.parent != self.root:
            raise RunNotFound(f"no run named {name!r}")
        if evaluation:
            if not (p / TRAIN_METRICS).is_file():
                raise RunNotFound(f"no training run named {top!r}")
            evals = (p / EVALS).resolve()
            q = (evals / evaluation).resolve()
            if q.parent != evals or not evals.is_relative_to(p) or not (q / TRACES).is_file():
                raise RunNotFound(f"training run {top!r} has no evaluation {evaluation!r}")
            return q, "eval"
        if (p / TRACES).is_file():
            return p, "eval"
        if (p / TRAIN_METRICS).is_file():
            return p, "train"
        raise RunNotFound(f"no run named {name!r}")

    def path(self, name: str) -> Path:
        """The folder of evaluation run ``name`` (one with questions and traces)."""
        p, kind = self.locate(name)
        if kind == "train":
            raise RunNotFound(f"{name!r} is a training run: its questions are in its checkpoint "
                              f"evaluations ({name}@iter-NNNNNN)")
        return p

    def plot(self, name: str, file: str) -> Path:
        run, _ = self.locate(name)
        if not PLOT.fullmatch(file):
            raise RunNotFound(f"invalid plot name {file!r}")
        for sub in PLOT_DIRS:
            p = (run / sub / file).resolve()
            if p.is_relative_to(run) and p.is_file():
                return p
        raise RunNotFound(f"run {name!r} has no plot {file!r}")

    def plots(self, run: Path) -> list[str]:
        out: list[str] = []
        for sub in PLOT_DIRS:
            d = run / sub
            if d.is_dir():
                out += sorted(f.name for f in d.iterdir() if PLOT.fullmatch(f.name)
                              and f.resolve().is_relative_to(run) and f.is_file())
        return list(dict.fromkeys(out))

    # ----------------------------------------------------------------- reading

    def names(self) -> list[str]:
        """Every run's name: the root's runs in name order, each training run followed by
        its checkpoint evaluations in iteration order."""
        if self.root is None or not self.root.is_dir():
            return []
        out = []
        for d in sorted(self.root.iterdir()):
            try:
                p, kind = self.locate(d.name)
            except RunNotFound:
                continue
            out.append(d.name)
            if kind == "train":
                out += self._evaluations(d.name, p)
        return out

    def _evaluations(self, name: str, p: Path) -> list[str]:
        """The names of training run ``name``'s checkpoint evaluations, in iteration order."""
        if not (p / EVALS).is_dir():
            return []
        out = []
        for e in sorted((p / EVALS).iterdir()):
            try:
                self.locate(f"{name}@{e.name}")
            except RunNotFound:
                continue
            out.append(f"{name}@{e.name}")
        return out

    def load(self, name: str) -> _Cached:
        p = self.path(name)
        st = (p / TRACES).stat()
        stamp = (st.st_size, st.st_mtime_ns)
        with self._lock:
            hit = self._cache.get(p)
            if hit is not None and hit.stamp == stamp:
                return hit
        data = load_run(p)
        entry = _Cached(stamp, data, {t.id: i for i, t in enumerate(data.traces)})
        with self._lock:
            self._cache[p] = entry
            while len(self._cache) > CACHED_RUNS:  # dicts keep insertion order: drop the oldest
                self._cache.pop(next(iter(self._cache)))
        return entry

    def listing(self) -> list[dict[str, Any]]:
        """One line per run, from its files only (no trace parsing, so the list stays fast).

        Every line: ``name``, ``kind`` (``eval`` or ``train``), ``method``, ``finished``,
        ``modified``, ``em``/``f1``/``acc``. An evaluation run adds ``dataset``, ``n``,
        ``created``, and for a checkpoint evaluation ``parent`` (its training run) and
        ``iteration``. A training run adds ``iterations`` (done), ``planned``,
        ``eval_dataset``, ``reward`` (the last iteration's) and ``best_iteration``; its
        ``em``/``f1``/``acc`` are its best development evaluation's. A run that vanishes
        while listed is left out; one whose files cannot be read is listed with ``error``.
        """
        out = []
        for name in self.names():
            try:
                p, kind = self.locate(name)
                out.append(self._train_line(name, p) if kind == "train"
                           else self._eval_line(name, p))
            except RunNotFound:
                continue
            except (OSError, ValueError, TypeError, KeyError) as e:
                log.warning("run %s: %r", name, e)
                out.append({"name": name, "kind": None, "error": f"{type(e).__name__}: {e}"})
        return out

    def _eval_line(self, name: str, p: Path) -> dict[str, Any]:
        manifest = _json(p / MANIFEST)
        metrics = _json(p / METRICS)
        ident = manifest.get("identity", {}) if isinstance(manifest, dict) else {}
        parent, _, evaluation = name.partition("@")
        line = {
            "name": name, "kind": "eval", "method": ident.get("method"),
            "dataset": ident.get("dataset"), "n": ident.get("n"),
            "created": manifest.get("created"), "modified": (p / TRACES).stat().st_mtime,
            "finished": _finished(p),
            "em": metrics.get("em"), "f1": metrics.get("f1"), "acc": metrics.get("acc"),
        }
        if evaluation:
            digits = evaluation.rpartition("-")[2]
            line.update(parent=parent, iteration=int(digits) if digits.isdigit() else None)
        return line

    def _train_line(self, name: str, p: Path,
                    rows: list[dict[str, Any]] | None = None) -> dict[str, Any]:
        rows = metrics_rows(p / TRAIN_METRICS) if rows is None else rows
        cfg = _yaml(p / CONFIG)
        planned = _get(cfg, "train", "iterations")
        planned = planned if isinstance(planned, int) and not isinstance(planned, bool) else None
        done = rows[-1]["iteration"] if rows else 0
        evals = [r for r in rows if _number(r.get("eval.f1"))]
        best = max(evals, key=lambda r: r["eval.f1"]) if evals else None

        def best_of(key: str) -> Any:
            v = None if best is None else best.get(key)
            return v if _number(v) else None

        reward = rows[-1].get("reward") if rows else None
        return {
            "name": name, "kind": "train", "method": _get(cfg, "method", "name"),
            "eval_dataset": _get(cfg, "train", "eval_dataset"),
            "iterations": done, "planned": planned,
            "modified": (p / TRAIN_METRICS).stat().st_mtime,
            "finished": planned is not None and done >= planned,
            "em": best_of("eval.em"), "f1": best_of("eval.f1"), "acc": best_of("eval.acc"),
            "best_iteration": None if best is None else best["iteration"],
            "reward": reward if _number(reward) else None,
        }

    def training(self, name: str) -> dict[str, Any]:
        """A training run's page: its rows (the curves), config, plots, best checkpoint and
        the names of its checkpoint evaluations."""
        p, kind = self.locate(name)
        if kind != "train":
            raise RunNotFound(f"{name!r} is not a training run")
        cfg = p / CONFIG
        best = _json(p.joinpath(*BEST))
        rows = metrics_rows(p / TRAIN_METRICS)  # read once: the run may be appending
        line = self._train_line(name, p, rows)
        try:
            config = cfg.read_text(encoding="utf-8") if cfg.is_file() else None
        except (OSError, ValueError):
            config = None
        return {"name": name, "kind": "train", "method": line["method"],
                "finished": line["finished"], "iterations": line["iterations"],
                "planned": line["planned"],
                "rows": [{k: v for k, v in r.items() if _number(v)} for r in rows],
                "evaluations": self._evaluations(name, p),
                "best": best or None, "config": config, "plots": self.plots(p)}

    def info(self, name: str) -> dict[str, Any]:
        if self.locate(name)[1] == "train":
            return self.training(name)
        entry = self.load(name)
        p = entry.data.path
        cfg = p / CONFIG
        return {"name": name, "kind": "eval", "method": entry.data.method, "manifest": entry.data.manifest,
                "summary": entry.data.summary, "finished": _finished(p),
                "config": cfg.read_text(encoding="utf-8") if cfg.is_file() else None,
                "plots": self.plots(p)}

    def traces(self, name: str, *, offset: int = 0, limit: int = 50, filter: str = "all",
               q: str = "") -> dict[str, Any]:
        if filter not in FILTERS:
            raise ValueError(f"filter must be one of {', '.join(FILTERS)}")
        entry = self.load(name)
        needle = q.strip().lower()
        rows = []
        for i, t in enumerate(entry.data.traces):
            if needle and needle not in t.question.lower() and needle not in t.id.lower() \
                    and needle not in (t.answer or "").lower():
                continue
            if filter != "all" and outcome(t) != filter:
                continue
            rows.append((i, t))
        page = rows[offset: offset + limit]
        return {"total": len(rows), "offset": offset, "limit": limit,
                "items": [trace_row(i, t) for i, t in page]}

    def trace(self, name: str, trace_id: str) -> Trace:
        entry = self.load(name)
        i = entry.by_id.get(trace_id)
        if i is None:
            raise RunNotFound(f"run {name!r} has no question {trace_id!r}")
        return entry.data.traces[i]


def _json(path: Path) -> dict[str, Any]:
    try:
        obj = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return obj if isinstance(obj, dict) else {}


def _yaml(path: Path) -> dict[str, Any]:
    import yaml

    try:
        obj = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, yaml.YAMLError):  # ValueError: not UTF-8
        return {}
    return obj if isinstance(obj, dict) else {}


def _get(tree: dict[str, Any], *keys: str) -> Any:
    for k in keys:
        if not isinstance(tree, dict):
            return None
        tree = tree.get(k)  # type: ignore[assignment]
    return tree


def _number(v: Any) -> bool:
    """A finite number a chart can draw (JSON has no NaN; bools are not numbers here)."""
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


def _finished(run: Path) -> bool:
    """A run is finished once metrics.json is at least as new as its last trace."""
    m, t = run / METRICS, run / TRACES
    return m.is_file() and m.stat().st_mtime_ns >= t.stat().st_mtime_ns
