#!/usr/bin/env bash
# Issue 38, comparison 2 of docs/results/qwen-runs/SPLITS.md ("the reader part"): `vanilla`
# with a trained reader against `vanilla`, cross-fitted over the 1,580 held-out questions.
# The reader recipe (issue 38, item 3): the answer generator fine-tuned on answers its shown
# documents support (`marag sft --recipe answers`), then best-of-n self-distillation over the
# same fold (`marag sft --recipe self-distill`, 4 samples at T = 1). Each fold model trains on
# its fold only (train-X.exclude.ids keeps out the other fold, development and confirmation);
# the choice between the SFT adapter and SFT + self-distillation is made on the development
# split, by the fold-A models, before any fold question is answered by either; then each fold
# model answers the other fold once. Every stage resumes (marag sft/eval do): run again after
# a kill. From the repository root (about 8 CPU hours on the 2-core box in all, by the
# rates measured here: ~3 s a `vanilla` question, the self-distillation 4 samples x 790 questions
# a fold the largest part):
#   bash docs/results/qwen-runs/crossfit/run_reader.sh [stage ...]
#   stages: sft distill dev vanilla heldout report   (heldout needs CHOSEN=sft|distill)
set -euo pipefail
M=${MARAG:-.venv/bin/marag}
CFG=configs/qwen/jade-train.yaml  # Qwen2.5-Coder-0.5B, its prompt profile, BM25 top-5 pooled
CF=runs/data/splits-cf
OUT=${OUT:-runs/crossfit}
stages=("$@"); [ ${#stages[@]} -eq 0 ] && stages=(sft distill dev)
has() { local s; for s in "${stages[@]}"; do [ "$s" = "$1" ] && return 0; done; return 1; }
other() { [ "$1" = a ] && echo b || echo a; }

[ -f $CF/fold-b.jsonl ] || .venv/bin/python benchmarks/make_crossfit_splits.py --out $CF
mkdir -p $OUT

for f in a b; do
  if has sft; then
    $M sft --config $CFG --method vanilla --recipe answers --dataset $CF/fold-$f.jsonl \
        --exclude-ids $CF/train-$f.exclude.ids --set sft.epochs=1 \
        --out $OUT/reader-sft-$f --no-progress
  fi
  if has distill; then
    $M sft --config $CFG --method vanilla --recipe self-distill \
        --adapter $OUT/reader-sft-$f/policy --samples 4 --temperature 1.0 \
        --dataset $CF/fold-$f.jsonl --exclude-ids $CF/train-$f.exclude.ids \
        --set sft.epochs=1 --out $OUT/reader-sd-$f --no-progress
  fi
done
if has dev; then  # the choice, on development, by the fold-A models
  $M eval --config $CFG --method vanilla --adapter $OUT/reader-sft-a/policy \
      --dataset $CF/dev.jsonl --out $OUT/dev-reader-sft-a --no-progress
  $M eval --config $CFG --method vanilla --adapter $OUT/reader-sft-a/policy \
      --adapter $OUT/reader-sd-a/policy --dataset $CF/dev.jsonl \
      --out $OUT/dev-reader-sd-a --no-progress
  .venv/bin/python benchmarks/paired_bootstrap.py $OUT/dev-reader-sd-a $OUT/dev-reader-sft-a
fi
if has vanilla; then  # the untrained row, once on all 1,580
  for f in a b; do
    $M eval --config $CFG --method vanilla --dataset $CF/fold-$f.jsonl \
        --out $OUT/vanilla-on-$f --no-progress
  done
fi
if has heldout; then  # once: each fold's chosen model on the other fold
  : "${CHOSEN:?set CHOSEN=sft or CHOSEN=distill, chosen on the development split}"
  for f in a b; do
    A=(--adapter $OUT/reader-sft-$f/policy)
    [ "$CHOSEN" = distill ] && A+=(--adapter $OUT/reader-sd-$f/policy)
    $M eval --config $CFG --method vanilla "${A[@]}" --dataset $CF/fold-$(other $f).jsonl \
        --out $OUT/reader-$CHOSEN-$f-on-$(other $f) --no-progress
  done
fi
if has report; then
  : "${CHOSEN:?set CHOSEN as for heldout}"
  .venv/bin/python benchmarks/paired_bootstrap.py \
      $OUT/reader-$CHOSEN-a-on-b,$OUT/reader-$CHOSEN-b-on-a $OUT/vanilla-on-a,$OUT/vanilla-on-b
fi
