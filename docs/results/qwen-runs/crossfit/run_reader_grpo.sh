#!/usr/bin/env bash
# Issue 38, item 3: GRPO on the answer generator over fold A's trained reader
# (configs/qwen/reader-grpo-fold-a.yaml; stated before any answer in
# docs/results/qwen-runs/SPLITS.md, addendum 2026-11-29 19:23 UTC), evaluated on the whole of
# fold B (790 questions) as `vanilla` with the reader's two adapters and the new one, against
# `reader-a-on-b` (the reader alone, run_team_full.sh) paired per question. Stages resume:
# `train` (marag train resumes from its last checkpoint where runs/ survived; skipped once the
# stash holds the finished adapter),
# `eval` (marag eval resumes from its traces), `report`. A session may start on a machine
# without runs/: the script restores what earlier sessions stashed in $STASH (the trained
# adapter in bfloat16 once training has finished, the evaluation's traces) and stashes after
# each stage; before a session ends, `... run_reader_grpo.sh stash` and commit $STASH. The
# evaluation reads the stashed (bfloat16) adapter on every machine alike. From the repo root:
#   bash docs/results/qwen-runs/crossfit/run_reader_grpo.sh [train eval report | stash]
# Change this file only by writing a new copy and renaming it over this one (mv).
set -euo pipefail
M=${MARAG:-.venv/bin/marag}
PY=${PYTHON:-.venv/bin/python}
CFG=configs/qwen/jade-train.yaml  # the evaluation's config, as every row of the protocol
CF=runs/data/splits-cf
OUT=${OUT:-runs/crossfit}
D=docs/results/qwen-runs/crossfit/team-s200/adapters
STASH=docs/results/qwen-runs/crossfit/reader-grpo
RUN=$OUT/reader-grpo-a
stages=("$@"); [ ${#stages[@]} -eq 0 ] && stages=(train eval report)
has() { local s; for s in "${stages[@]}"; do [ "$s" = "$1" ] && return 0; done; return 1; }
[ -f $CF/fold-b.jsonl ] || $PY benchmarks/make_crossfit_splits.py --out $CF
mkdir -p $OUT
[ -d $STASH ] && $PY benchmarks/stash_runs.py restore $STASH $OUT
stash() {  # the adapter only once training has finished (a killed run's policy is not one)
  local inc=(--include 'reader-grpo-a-on-b')
  [ -f $RUN/finished ] && inc+=(--include 'reader-grpo-a/policy')
  $PY benchmarks/stash_runs.py save $OUT $STASH "${inc[@]}"
}
if has stash; then stash; exit 0; fi
if has train && [ ! -f $STASH/reader-grpo-a/policy/adapter_model.safetensors ]; then
  $M train --config configs/qwen/reader-grpo-fold-a.yaml --out $RUN --no-progress
  touch $RUN/finished
  mkdir -p $STASH/records
  cp $RUN/config.yaml $RUN/metrics.csv $STASH/records/
  stash
fi
if has eval; then
  A=$STASH/reader-grpo-a/policy
  [ -f $A/adapter_model.safetensors ] || { echo "no trained adapter in $A: run the train stage" >&2; exit 2; }
  $M eval --config $CFG --method vanilla --adapter $D/sft --adapter $D/ppo --adapter $A \
      --set llms.default.dtype=float32 --dataset $CF/fold-b.jsonl \
      --out $OUT/reader-grpo-a-on-b --no-progress
  stash
fi
if has report; then  # the one stated comparison: two-sided paired t at 0.05, 95% interval
  $PY benchmarks/family_table.py --out $OUT/report-reader-grpo.md \
      --row grpo "reader + GRPO on AG (fold A's, on fold B)" $OUT/reader-grpo-a-on-b \
      --row reader "the reader (fold A's, on fold B)" $OUT/reader-a-on-b \
      --compare grpo reader "reader + GRPO - reader"
  cat $OUT/report-reader-grpo.md
fi
