#!/usr/bin/env bash
# One training iteration of `search-r1` and one of `jade` at equal traces (4 questions x 5
# samples = 20), each from its committed adapter with its own preset, back to back
# (BENCHMARKS.md, "A `search-r1` iteration against a `jade` iteration at equal traces").
# From the repository root, with runs/data/all-bm25 and runs/data/splits-cf built (README of
# docs/results/qwen-runs); about 25 minutes on the 2-core box. Seconds per phase: the
# seconds.* fields of each run's metrics.jsonl (copied beside this script).
set -euxo pipefail
M=${MARAG:-.venv/bin/marag}
date
$M train --config configs/qwen/search-r1-grpo-fold-a.yaml --set llms.default.adapter=qwen-search-r1 \
    --set train.iterations=1 --set train.eval_dataset=null --set train.drop_flat_groups=false \
    --out runs/speed/sr1b --no-progress
date
$M train --config configs/qwen/jade-train.yaml --set llms.default.adapter=qwen-jade-2c \
    --set train.iterations=1 --set train.questions_per_iteration=4 --set train.samples_per_question=5 \
    --set train.exclude_ids=runs/data/splits-cf/train-a.exclude.ids --set train.eval_dataset=null \
    --out runs/speed/jadeb --no-progress
date
