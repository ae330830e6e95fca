#!/usr/bin/env bash
# Search-R1 on Qwen2.5-Coder-0.5B under the held-out protocol (docs/results/qwen-runs/SPLITS.md,
# addendum of 2026-11-26 for this row): train on fold A, choose on development, evaluate once
# on a stratified sample of fold B. Each stage resumes (marag sft/train/eval do), so the
# script can be run again after a kill. Run from the repository root:
#   bash docs/results/qwen-search-r1/run_heldout.sh [stage ...]   (stages: sft grpo dev heldout)
set -euo pipefail
M=.venv/bin/marag
BASE=configs/qwen/search-r1-grpo-train.yaml
CF=runs/data/splits-cf
stages=("$@"); [ ${#stages[@]} -eq 0 ] && stages=(sft grpo dev heldout)
has() { local s; for s in "${stages[@]}"; do [ "$s" = "$1" ] && return 0; done; return 1; }

[ -f $CF/fold-b.jsonl ] || .venv/bin/python benchmarks/make_crossfit_splits.py --out $CF
[ -f $CF/fold-b-s200.jsonl ] || .venv/bin/python benchmarks/stratified_subsample.py \
    $CF/fold-b.jsonl -n 200 --seed 38 --out $CF/fold-b-s200

if has sft; then  # the tags' warm start on 300 fold-A questions (marag sft --recipe answers)
  $M sft --config $BASE --method search-r1 --recipe answers \
      --dataset $CF/fold-a.jsonl --exclude-ids $CF/train-a.exclude.ids \
      --set sft.max_examples=300 --set sft.epochs=1 --out runs/train/sr1-sft-a --no-progress
  $M eval --config $BASE --method search-r1 --adapter runs/train/sr1-sft-a/policy \
      --dataset $CF/dev.jsonl --limit 40 --seed 0 --out runs/eval/sr1-sft-a-dev40 --no-progress
fi
if has grpo; then  # GRPO from the warm start, fold A only
  $M train --config configs/qwen/search-r1-grpo-fold-a.yaml --out runs/train/sr1-grpo-a
fi
GRPO=$(ls -d runs/train/sr1-grpo-a/checkpoints/iter-* 2>/dev/null | tail -1)/policy
if has dev; then   # the choice between the warm start and GRPO: development split, 40 questions
  $M eval --config $BASE --method search-r1 --adapter runs/train/sr1-sft-a/policy \
      --adapter "$GRPO" --dataset $CF/dev.jsonl --limit 40 --seed 0 \
      --out runs/eval/sr1-grpo-a-dev40 --no-progress
fi
if has heldout; then  # once: the chosen model (CHOSEN=sft|grpo) and the untrained one
  : "${CHOSEN:?set CHOSEN=sft or CHOSEN=grpo, chosen on the development split}"
  if [ "$CHOSEN" = grpo ]; then A=(--adapter runs/train/sr1-sft-a/policy --adapter "$GRPO")
  else A=(--adapter runs/train/sr1-sft-a/policy); fi
  $M eval --config $BASE --method search-r1 "${A[@]}" --dataset $CF/fold-b-s200.jsonl \
      --out runs/eval/sr1-$CHOSEN-a-foldb200 --no-progress
  $M eval --config $BASE --method search-r1 --dataset $CF/fold-b-s200.jsonl \
      --out runs/eval/sr1-untrained-foldb200 --no-progress
  $M eval --config $BASE --method vanilla --dataset $CF/fold-b-s200.jsonl \
      --out runs/eval/vanilla-foldb200 --no-progress
  .venv/bin/python benchmarks/paired_bootstrap.py runs/eval/sr1-$CHOSEN-a-foldb200 \
      runs/eval/sr1-untrained-foldb200
fi
