"""``marag data list`` and ``marag data get NAME...``: the benchmarks of the seed papers' tables,
fetched from FlashRAG's hub repository at a pinned commit, with their licences."""

from __future__ import annotations

import argparse
import sys
from typing import Any

HELP = "list the benchmark datasets, or download them (FlashRAG's copies, pinned) with licences"


def register(sub: Any) -> None:
    p = sub.add_parser(
        "data", help=HELP,
        description=HELP + ". `get` reads RUC-NLPIR/FlashRAG_datasets at a pinned commit "
        "through the Hugging Face cache (HF_ENDPOINT, HF_HUB_OFFLINE and HF_HUB_CACHE apply), "
        "normalises and validates every record, and writes OUT/<folder>/<split>.jsonl in "
        "FlashRAG's format with <split>.provenance.json beside it. See docs/datasets.md.")
    actions = p.add_subparsers(dest="data_action", metavar="ACTION")
    actions.add_parser("list", help="the datasets: splits, question counts, licence, source")
    get = actions.add_parser(
        "get", help="download datasets into a data folder",
        description="Download each dataset's split from FlashRAG's hub repository at the pinned "
        "revision (or --revision), print its licence and source, and write "
        "OUT/<folder>/<split>.jsonl (FlashRAG format: id, question, golden_answers, metadata) "
        "and <split>.provenance.json. A broken record is reported with its line and left out; "
        "the rest is written (--strict: nothing is written).")
    get.add_argument("names", nargs="+", metavar="NAME",
                     help="dataset names (see `marag data list`), or `all`")
    get.add_argument("--out", default="data", metavar="DIR",
                     help="data folder (default: data; `marag table --data DIR` reads it)")
    get.add_argument("--split", default=None,
                     help="split to fetch, comma-separated splits, or `all` "
                          "(default: each dataset's evaluation split)")
    get.add_argument("--revision", default=None,
                     help="a commit sha or branch of the hub repository instead of the pin")
    get.add_argument("--cache-dir", default=None, metavar="DIR",
                     help="hub cache (default $HF_HUB_CACHE or ~/.cache/huggingface/hub)")
    get.add_argument("--strict", action="store_true",
                     help="a broken record fails the dataset and nothing is written for it")
    p.set_defaults(func=run)


def _list() -> int:
    from marag.datasets import REGISTRY

    rows = [("name", "dataset", "splits (* = default)", "questions", "licence", "hub folder")]
    for s in REGISTRY.values():
        splits = ", ".join(f"{x}*" if x == s.default_split else x for x in s.splits)
        n = s.sizes.get(s.default_split)
        rows.append((s.name, s.title, splits, f"{n:,}" if n else "?", s.licence, s.folder))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())
    print("\nAll are read from RUC-NLPIR/FlashRAG_datasets (card licence: CC BY-SA 4.0) at a "
          "pinned commit; `marag data get NAME` prints each one's source and licence.")
    return 0


def _plan(names: list[str], split: str | None) -> list[tuple[str, str]]:
    from marag.datasets import REGISTRY, DatasetError, get_spec

    specs = list(REGISTRY.values()) if "all" in names else [get_spec(n) for n in names]
    plan: list[tuple[str, str]] = []
    for spec in {s.name: s for s in specs}.values():
        wanted = (list(spec.splits) if split == "all" else
                  [s.strip() for s in split.split(",") if s.strip()] if split else
                  [spec.default_split])
        for s in wanted:
            if s not in spec.splits:
                raise DatasetError(f"{spec.name} has no split {s!r} "
                                   f"(available: {', '.join(spec.splits)})")
            plan.append((spec.name, s))
    return plan


def run(args: argparse.Namespace) -> int:
    if (args.data_action or "list") == "list":
        return _list()
    from marag.datasets import FLASHRAG_LICENCE, DatasetError, describe_problems, get_dataset

    try:
        plan = _plan(args.names, args.split)
    except DatasetError as e:
        print(f"marag data get: {e}", file=sys.stderr)
        return 2
    failed = 0
    for name, split in plan:
        try:
            got = get_dataset(name, split, args.out, revision=args.revision,
                              cache_dir=args.cache_dir, strict=args.strict)
        except DatasetError as e:
            print(f"marag data get: {e}", file=sys.stderr)
            failed += 1
            continue
        s, hub = got.spec, got.hub
        commit = f" (commit {hub.commit})" if hub.commit and hub.commit != hub.revision else ""
        print(f"{s.name} ({s.title}) {split}: {s.repo} {hub.filename} at {hub.revision}{commit}")
        print(f"  url      {hub.url}")
        print(f"  sha256   {got.sha256}")
        print(f"  licence  {s.licence} ({s.licence_source}); collection: {FLASHRAG_LICENCE}")
        print(f"  source   {s.source}")
        print(f"  corpus   {s.corpus}")
        if got.problems:
            print(f"marag data get: {s.name} {split}: {len(got.problems)} of {got.records} "
                  f"records are broken{' (--strict: nothing written)' if args.strict else ''}:\n"
                  f"{describe_problems(got.problems, show=20)}", file=sys.stderr)
        if got.out is None:
            print(f"  nothing written: {got.questions} readable questions", file=sys.stderr)
            failed += 1
            continue
        stated = s.sizes.get(split)
        note = (f" (FlashRAG states {stated:,})" if stated and stated != got.questions else "")
        left = f"; {len(got.problems)} broken left out" if got.problems else ""
        print(f"  wrote    {got.out}: {got.questions:,} questions{note}{left}; "
              f"provenance {got.provenance}")
    return 1 if failed else 0
