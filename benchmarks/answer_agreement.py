"""How many answers of one evaluation run are the same as another's, on the questions of the first.

    python benchmarks/answer_agreement.py runs/reproduce/team docs/results/.../team-s200/team

Checks a re-run against a committed row (issue 38's "the figures reproduce from a fresh clone
on a sample", a re-run baseline against its earlier row): prints how many of the first run's
questions got the same answer string in the second, and the mean F1 of both on those
questions (a question that failed in either run is never the same, and is counted). Either
side is a run directory with ``traces.jsonl`` or ``traces.jsonl.gz``. A
question of the first run that the second lacks is an error, not a mismatch: the two runs
were then not made on the same questions.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import NamedTuple

from paired_bootstrap import traces_file

from marag.types import Trace, read_jsonl


class Agreement(NamedTuple):
    same: int  # questions answered in both runs (neither failed) with the same answer string
    n: int  # questions of the first run
    failed: int  # questions that failed in either run (never counted the same)
    f1_first: float  # mean F1 x 100 of the first run on its questions
    f1_second: float  # mean F1 x 100 of the second run on the same questions


def agreement(first: dict[str, Trace], second: dict[str, Trace]) -> Agreement:
    """Answer agreement of ``first`` with ``second``, over the questions of ``first``."""
    if not first:
        raise ValueError("the first run has no questions")
    missing = sorted(set(first) - set(second))
    if missing:
        raise ValueError(f"{len(missing)} question(s) of the first run are not in the second, "
                         f"e.g. {missing[0]!r}")
    ids = sorted(first)
    failed = {i for i in ids if "failed" in (first[i].status, second[i].status)}
    same = sum(first[i].answer == second[i].answer for i in ids if i not in failed)

    def mean_f1(runs: dict[str, Trace]) -> float:
        return 100.0 * sum(float(runs[i].metrics.get("f1", 0.0)) for i in ids) / len(ids)

    return Agreement(same, len(ids), len(failed), mean_f1(first), mean_f1(second))


def load(run: Path) -> dict[str, Trace]:
    return {t.id: t for t in read_jsonl(traces_file(run), Trace)}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("first", type=Path, help="run directory whose questions are compared")
    ap.add_argument("second", type=Path, help="run directory to compare with (e.g. committed)")
    ap.add_argument("--label", default="", help="what to call the first run in the line printed")
    args = ap.parse_args(argv)
    try:
        a = agreement(load(args.first), load(args.second))
    except ValueError as e:
        raise SystemExit(f"{args.first} against {args.second}: {e}") from None
    failed = f" ({a.failed} failed in either run)" if a.failed else ""
    print(f"{args.label or args.first}: {a.same} of {a.n} answers the same as {args.second}"
          f"{failed}; F1 {a.f1_first:.1f} against {a.f1_second:.1f} on the same questions")


if __name__ == "__main__":
    main()
