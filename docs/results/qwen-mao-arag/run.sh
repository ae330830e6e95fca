#!/usr/bin/env bash
# MAO-ARAG trained on fold A (docs/results/qwen-mao-arag/README.md): the planner's plan-label
# SFT, then planner-only PPO (configs/qwen/mao-arag-train-fold-a.yaml). Every stage resumes
# (marag sft/train do): run again after a kill. From the repository root:
#   bash docs/results/qwen-mao-arag/run.sh [sft] [train]
set -euo pipefail
M=${MARAG:-.venv/bin/marag}
CF=runs/data/splits-cf
PLANS=docs/results/qwen-runs/crossfit/team-s200/plans-a   # fold A's fixed-plan runs
stages=("$@"); [ ${#stages[@]} -eq 0 ] && stages=(sft train)
has() { local s; for s in "${stages[@]}"; do [ "$s" = "$1" ] && return 0; done; return 1; }
[ -f $CF/fold-a.jsonl ] || .venv/bin/python benchmarks/make_crossfit_splits.py --out $CF
if has sft; then  # `R, AG` listed first: a tie goes to the plan with documents
  $M sft --config configs/qwen/mao-arag-train.yaml --set 'sft.roles=[planner]' \
      --set sft.min_f1=0.5 --set sft.epochs=2 --exclude-ids $CF/train-a.exclude.ids \
      --plans "R, AG=$PLANS/R-AG/traces.jsonl.gz" "AG=$PLANS/AG/traces.jsonl.gz" \
      --out runs/sft/mao-plans-a --no-progress
fi
if has train; then
  $M train --config configs/qwen/mao-arag-train-fold-a.yaml --out runs/train/qwen-mao-arag-a \
      --no-progress
fi
