"""Representative splits with two-fold cross-fitting (issue 38, item 1), drawn from
``../shared/data/<name>.questions.jsonl`` for nq_open, hotpotqa, 2wikimultihopqa, musique.

The rule, exactly (``RULE`` below is the same text; it goes into the manifest):

1. *confirmation*: the old held-out questions (``make_splits.py``: positions [0, 50) of each
   file, 200 questions) are set aside first, untouched by development and both folds; they
   serve only as a confirmation set.
2. *strata*: every other question falls in one stratum, ``stratum()``: nq_open one stratum;
   hotpotqa and 2wikimultihopqa by the record's ``type``, a yes/no answer (a golden answer
   that is ``yes`` or ``no``) its own stratum within the type; musique by hop count, the
   ``<k>hop`` prefix of its id (``3hop1`` and ``3hop2`` are both ``3hop``).
3. *order*: within a stratum questions are ranked by ``sha256("<seed>:<id>")`` (hex,
   ascending): a seeded shuffle that no library version changes.
4. *development*: ``--dev`` questions in all, allotted to strata in proportion to their size
   by largest remainders (``floor(dev * n_s / N)`` each, then one more to the strata with the
   largest fractional parts, ties by stratum name); a stratum's allotment is its first
   questions in the order of 3.
5. *folds*: the rest of each stratum alternates between the folds in that order; strata are
   taken by name, and a stratum starts with fold A when A holds no more questions than B so
   far, else with B. The folds differ by at most one question overall and in every stratum.

Cross-fitting: a model trained on fold A (training excludes ``train-a.exclude.ids``: fold B,
development, confirmation) is evaluated on fold B and vice versa, so the held-out n is every
question of both folds; an untrained method is evaluated once on both. Development chooses
prompts, settings and checkpoints for both fold models.

    python benchmarks/make_crossfit_splits.py --out runs/data/splits-cf

writes ``dev``, ``fold-a``, ``fold-b``, ``heldout`` (fold A then fold B) and ``confirm``
as ``.jsonl`` (the shared files' lines) and ``.ids``, ``train-a.exclude.ids`` and
``train-b.exclude.ids``, and ``manifest.json`` (seed, rule, source digests, counts per
stratum and split). The ids and the manifest are committed in
docs/results/qwen-runs/splits-cf/ (``--ids-only`` writes just those); ``--check DIR``
regenerates and compares with a committed folder.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

DATASETS = ("nq_open", "hotpotqa", "2wikimultihopqa", "musique")
CONFIRM = (0, 50)  # make_splits.HELDOUT: the old held-out questions
SEED = 38
DEV = 120
YES_NO = frozenset({"yes", "no"})
RULE = (
    "confirmation = positions [0, 50) of each dataset file (the old held-out 200), set aside "
    "first. Strata: nq_open one; hotpotqa and 2wikimultihopqa by type, yes/no answers their "
    "own stratum within a type; musique by the <k>hop prefix of the id. Within a stratum, "
    "order by sha256('<seed>:<id>') hex ascending. Development: --dev questions allotted to "
    "strata by largest remainders of dev * n_s / N (ties by stratum name), each stratum's "
    "first ones. The rest of each stratum alternates between fold A and fold B; strata by "
    "name, each starting with fold A when |A| <= |B| so far, else B. A model trained on one "
    "fold is evaluated on the other; held-out = fold A + fold B.")


def is_yes_no(record: dict) -> bool:
    return any(str(a).strip().lower() in YES_NO for a in record.get("golden_answers", []))


def stratum(name: str, record: dict) -> str:
    """The stratum of one question of dataset ``name`` (rule 2)."""
    if name == "musique":
        qid = str(record["id"])
        hops = qid.split("hop", 1)[0]
        if not hops.isdigit():
            raise ValueError(f"musique id {qid!r} does not start with <k>hop")
        return f"musique/{hops}hop"
    if name in ("hotpotqa", "2wikimultihopqa"):
        kind = record.get("type") or "untyped"
        return f"{name}/{kind}" + ("/yes-no" if is_yes_no(record) else "")
    return name


def rank(seed: int, qid: str) -> str:
    return hashlib.sha256(f"{seed}:{qid}".encode()).hexdigest()


def allot(sizes: dict[str, int], total: int) -> dict[str, int]:
    """``total`` split over strata in proportion to ``sizes`` by largest remainders (ties by
    stratum name)."""
    n = sum(sizes.values())
    if not 0 <= total <= n:
        raise ValueError(f"cannot draw {total} of {n} questions")
    quota = {s: total * k / n for s, k in sizes.items()}
    got = {s: int(q) for s, q in quota.items()}
    rest = total - sum(got.values())
    for s in sorted(quota, key=lambda s: (-(quota[s] - got[s]), s))[:rest]:
        got[s] += 1
    return got


def split(records: dict[str, list[dict]], seed: int = SEED, dev: int = DEV
          ) -> dict[str, list[dict]]:
    """``{"confirm", "dev", "fold-a", "fold-b"}`` -> records (each with ``_stratum``), from
    each dataset's records in file order (rules 1-5)."""
    out: dict[str, list[dict]] = {"confirm": [], "dev": [], "fold-a": [], "fold-b": []}
    strata: dict[str, list[dict]] = {}
    seen: set[str] = set()
    for name, rows in records.items():
        for i, r in enumerate(rows):
            qid = str(r["id"])
            if qid in seen:
                raise ValueError(f"question id {qid} occurs twice")
            seen.add(qid)
            r = {**r, "_stratum": stratum(name, r)}
            if CONFIRM[0] <= i < CONFIRM[1]:
                out["confirm"].append(r)
            else:
                strata.setdefault(r["_stratum"], []).append(r)
    for rows in strata.values():
        rows.sort(key=lambda r: rank(seed, str(r["id"])))
    n_dev = allot({s: len(v) for s, v in strata.items()}, dev)
    for s in sorted(strata):
        rows = strata[s]
        out["dev"] += rows[:n_dev[s]]
        first, second = (("fold-a", "fold-b") if len(out["fold-a"]) <= len(out["fold-b"])
                         else ("fold-b", "fold-a"))
        for j, r in enumerate(rows[n_dev[s]:]):
            out[first if j % 2 == 0 else second].append(r)
    return out


def counts(rows: list[dict]) -> dict[str, int]:
    c: dict[str, int] = {}
    for r in rows:
        c[r["_stratum"]] = c.get(r["_stratum"], 0) + 1
    return dict(sorted(c.items()))


def by_dataset(strata: dict[str, int]) -> dict[str, int]:
    c: dict[str, int] = {}
    for s, k in strata.items():
        d = s.split("/", 1)[0]
        c[d] = c.get(d, 0) + k
    return c


def read(data: Path) -> tuple[dict[str, list[dict]], dict[str, list[str]], dict[str, str]]:
    """Records, raw lines and sha256 of each dataset's question file."""
    records, lines, digests = {}, {}, {}
    for name in DATASETS:
        path = data / f"{name}.questions.jsonl"
        raw = path.read_bytes()
        digests[name] = hashlib.sha256(raw).hexdigest()
        lines[name] = [ln for ln in raw.decode("utf-8").splitlines() if ln.strip()]
        records[name] = [json.loads(ln) for ln in lines[name]]
        if len(records[name]) < CONFIRM[1]:
            raise SystemExit(f"{name}: {len(records[name])} questions, fewer than the "
                             f"{CONFIRM[1]} of the confirmation set")
    return records, lines, digests


def manifest(parts: dict[str, list[dict]], seed: int, dev: int, digests: dict[str, str],
             old_dev: set[str]) -> dict:
    splits = {k: {"n": len(v), "by_dataset": by_dataset(counts(v)), "by_stratum": counts(v)}
              for k, v in parts.items()}
    held = parts["fold-a"] + parts["fold-b"]
    for key, rows in {"heldout": held, "pool": parts["dev"] + held}.items():
        splits[key] = {"n": len(rows), "by_dataset": by_dataset(counts(rows)),
                       "by_stratum": counts(rows)}
    return {
        "seed": seed, "dev": dev, "rule": RULE, "script": "benchmarks/make_crossfit_splits.py",
        "sources": {f"{k}.questions.jsonl": {"sha256": v} for k, v in digests.items()},
        # pool: every question outside the confirmation set (dev + fold A + fold B)
        "splits": splits,
        # the old development range ([100, 150), prompts and checkpoints of the earlier runs)
        # is not set aside: where its questions went
        "old_dev_range": {k: sum(str(r["id"]) in old_dev for r in v)
                          for k, v in parts.items() if k != "confirm"},
    }


def outputs(parts: dict[str, list[dict]]) -> dict[str, list[str]]:
    """The id files: each split, heldout (fold A then B), and each fold model's exclusion."""
    ids = {k: [str(r["id"]) for r in v] for k, v in parts.items()}
    ids["heldout"] = ids["fold-a"] + ids["fold-b"]
    base = ids["dev"] + ids["confirm"]
    ids["train-a.exclude"] = base + ids["fold-b"]
    ids["train-b.exclude"] = base + ids["fold-a"]
    return ids


def build(data: Path, seed: int, dev: int) -> tuple[dict, dict[str, list[str]], dict,
                                                    dict[str, str]]:
    records, lines, digests = read(data)
    parts = split(records, seed, dev)
    old_dev = {str(r["id"]) for rows in records.values() for r in rows[100:150]}
    line_of = {str(r["id"]): ln for name in DATASETS
               for r, ln in zip(records[name], lines[name])}
    return parts, outputs(parts), manifest(parts, seed, dev, digests, old_dev), line_of


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path,
                    default=Path(__file__).resolve().parents[1].parent / "shared" / "data")
    ap.add_argument("--out", type=Path, help="folder for the question files, ids and manifest")
    ap.add_argument("--seed", type=int, default=SEED)
    ap.add_argument("--dev", type=int, default=DEV, help=f"development questions (default {DEV})")
    ap.add_argument("--ids-only", action="store_true",
                    help="write only the .ids files and manifest.json (what is committed)")
    ap.add_argument("--check", type=Path, metavar="DIR",
                    help="regenerate and compare with the ids and manifest committed in DIR")
    args = ap.parse_args(argv)
    if not args.out and not args.check:
        ap.error("give --out, --check, or both")
    _, ids, man, line_of = build(args.data, args.seed, args.dev)
    if args.check:
        bad = [f"{k}.ids" for k, v in ids.items()
               if (args.check / f"{k}.ids").read_text(encoding="utf-8").split() != v]
        if json.loads((args.check / "manifest.json").read_text(encoding="utf-8")) != man:
            bad.append("manifest.json")
        if bad:
            print(f"{args.check}: differs from a fresh draw: {', '.join(bad)}", file=sys.stderr)
            return 1
        print(f"{args.check}: the same as a fresh draw (seed {args.seed})")
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        for k, v in ids.items():
            (args.out / f"{k}.ids").write_text("\n".join(v) + "\n", encoding="utf-8")
            if not args.ids_only and not k.endswith(".exclude"):
                (args.out / f"{k}.jsonl").write_text(
                    "\n".join(line_of[q] for q in v) + "\n", encoding="utf-8")
        (args.out / "manifest.json").write_text(json.dumps(man, indent=1) + "\n",
                                                encoding="utf-8")
        print(f"{args.out}: " + ", ".join(f"{k} {man['splits'][k]['n']}"
                                          for k in ("dev", "fold-a", "fold-b", "heldout",
                                                    "confirm")))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
