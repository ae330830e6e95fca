"""A question file from committed ids: the questions of ``../shared/data/*.questions.jsonl``
whose id is listed in IDS, in IDS's order, as marag records naming their dataset (how the learning runs' question sets are rebuilt from the
ids committed beside their results, since the shared data is not copied into the repository).

    python benchmarks/questions_by_id.py docs/results/qwen-runs/sft-plans/question.ids \\
        runs/data/splits/sft-plans.jsonl
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from marag.datasets import load_questions


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("ids", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--data", type=Path,
                    default=Path(__file__).resolve().parents[1].parent / "shared" / "data")
    args = ap.parse_args()
    wanted = args.ids.read_text(encoding="utf-8").split()
    lines: dict[str, str] = {}
    for path in sorted(args.data.glob("*.questions.jsonl")):
        for q in load_questions(path):  # each record names its dataset (the file's)
            if q.id in lines:
                raise SystemExit(f"{path}: id {q.id} is in another question file too")
            lines[q.id] = json.dumps(q.to_dict(), ensure_ascii=False)
    missing = [q for q in wanted if q not in lines]
    if missing:
        raise SystemExit(f"{len(missing)} ids are in no question file under {args.data}, "
                         f"e.g. {missing[0]}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("".join(lines[q] + "\n" for q in wanted), encoding="utf-8")
    print(f"{len(wanted)} questions -> {args.out}")


if __name__ == "__main__":
    main()
