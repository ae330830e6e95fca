"""The fixed splits of the learning runs (issue "Learning the papers' result"), by position in
each ``../shared/data/<name>.questions.jsonl`` (file order):

* held-out: questions [0, 50) of each dataset: the final table only, touched once;
* development: questions [100, 150): prompts chosen here (``benchmarks/prompts.py`` default
  offset) and, its first ``--dev-per-dataset``, the checkpoint evaluation during training;
  the rest of it (``devb``: [125, 150) by default) is a second development half, never used
  by training's checkpoint evaluation: a second opinion on a chosen checkpoint before the
  held-out questions are touched;
* training: every other question (``exclude.ids`` keeps held-out and development out).

    python benchmarks/make_splits.py --out runs/data/splits

writes ``heldout.jsonl``, ``dev.jsonl``, ``devb.jsonl`` (the lines as they are in the shared
files), ``heldout.ids``, ``dev.ids``, ``devb.ids`` and ``exclude.ids``. The ids are committed
beside the run configs (docs/results/qwen-runs/splits/); the question files are not (they are
copies of shared data).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

DATASETS = ("nq_open", "hotpotqa", "2wikimultihopqa", "musique")
HELDOUT = (0, 50)
DEV = (100, 150)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default=str(Path(__file__).resolve().parents[1].parent
                                          / "shared" / "data"))
    ap.add_argument("--out", required=True)
    ap.add_argument("--dev-per-dataset", type=int, default=25,
                    help="development questions per dataset in dev.jsonl (default 25)")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    held: list[str] = []
    dev: list[str] = []
    devb: list[str] = []
    excluded: list[str] = []
    for name in DATASETS:
        lines = [ln for ln in Path(args.data, f"{name}.questions.jsonl").read_text(
            encoding="utf-8").splitlines() if ln.strip()]
        if len(lines) < DEV[1]:
            raise SystemExit(f"{name}: {len(lines)} questions, the splits need {DEV[1]}")
        held += lines[HELDOUT[0]:HELDOUT[1]]
        dev += lines[DEV[0]:DEV[0] + args.dev_per_dataset]
        devb += lines[DEV[0] + args.dev_per_dataset:DEV[1]]
        excluded += [json.loads(ln)["id"] for ln in
                     lines[HELDOUT[0]:HELDOUT[1]] + lines[DEV[0]:DEV[1]]]
    for key, lines in {"heldout": held, "dev": dev, "devb": devb}.items():
        (out / f"{key}.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
        ids = [json.loads(ln)["id"] for ln in lines]
        (out / f"{key}.ids").write_text("\n".join(ids) + "\n", encoding="utf-8")
    (out / "exclude.ids").write_text("\n".join(excluded) + "\n", encoding="utf-8")
    print(f"{out}: held-out {len(held)}, dev {len(dev)}, dev b {len(devb)}, "
          f"excluded from training {len(excluded)}")


if __name__ == "__main__":
    main()
