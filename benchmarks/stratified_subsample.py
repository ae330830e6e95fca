"""A seeded, stratified sample of a question file: ``n`` questions allotted to the strata of
``make_crossfit_splits.stratum`` (dataset, then type, yes/no or hop count) in proportion to
their size by largest remainders; inside a stratum the first ones by ``sha256("<seed>:<id>")``.

Used when a row of the held-out protocol cannot afford a whole fold on this CPU: the sample
keeps the fold's mix of datasets and question types, which ``marag eval --limit`` (a plain
seeded sample) does not promise.

    python benchmarks/stratified_subsample.py runs/data/splits-cf/fold-b.jsonl -n 200 \\
        --seed 38 --out runs/data/splits-cf/fold-b-s200
writes OUT.jsonl (the records, in stratum order) and OUT.ids.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from make_crossfit_splits import allot, rank, stratum


def subsample(records: list[dict], n: int, seed: int) -> list[dict]:
    """``n`` of ``records`` (each with a ``dataset`` field), stratified as the module says."""
    strata: dict[str, list[dict]] = {}
    for r in records:
        name = r.get("dataset")
        if not name:
            raise ValueError(f"question {r.get('id')!r} has no 'dataset' field")
        strata.setdefault(stratum(str(name), r), []).append(r)
    quota = allot({s: len(v) for s, v in strata.items()}, n)
    out: list[dict] = []
    for s in sorted(strata):
        rows = sorted(strata[s], key=lambda r: rank(seed, str(r["id"])))
        out += rows[:quota[s]]
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("questions", type=Path)
    p.add_argument("-n", type=int, required=True)
    p.add_argument("--seed", type=int, default=38)
    p.add_argument("--out", type=Path, required=True, help="OUT.jsonl and OUT.ids are written")
    args = p.parse_args(argv)
    records = [json.loads(line) for line in args.questions.read_text(encoding="utf-8")
               .splitlines() if line.strip()]
    try:
        rows = subsample(records, args.n, args.seed)
    except ValueError as e:
        print(f"stratified_subsample: {e}", file=sys.stderr)
        return 2
    args.out.parent.mkdir(parents=True, exist_ok=True)
    Path(f"{args.out}.jsonl").write_text(
        "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    Path(f"{args.out}.ids").write_text("".join(f"{r['id']}\n" for r in rows), encoding="utf-8")
    by: dict[str, int] = {}
    for r in rows:
        by[r["dataset"]] = by.get(r["dataset"], 0) + 1
    print(f"{len(rows)} of {len(records)} questions: "
          + ", ".join(f"{k} {v}" for k, v in sorted(by.items())))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
