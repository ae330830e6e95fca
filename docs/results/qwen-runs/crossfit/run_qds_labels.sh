#!/usr/bin/env bash
# Issue 38, development only: does a warm start labelled with a decomposition plan give a
# planner that chooses something other than `R, AG`? Family 1 (team-s200/) found the fold-A
# team choosing `R, AG` for all 200 questions: its plan labels offered only `AG` and `R, AG`.
# Here the same stratified 320 of fold A are also answered by the fixed plan `QDS` (serial
# decomposition, `R, AG` at each part: method.root_plan / method.sub_plan), the plan labels
# are drawn from the three runs, and the new warm start and family 1's are compared on the
# development split (runs/data/splits-cf/dev.jsonl, 120 questions), never on fold B or the
# held-out folds. Every stage resumes (marag eval/sft do). From the repository root:
#   bash docs/results/qwen-runs/crossfit/run_qds_labels.sh [stage ...]
#   stages: labels sft dev report
# Not run with Qwen2.5-Coder-0.5B: the probe (probe-decomposition/README.md, 40 of the same
# questions) found a fixed QDS, with its serial rewrite replaced or guarded, strictly better
# than both `AG` and `R, AG` on 1-2 of 40, so these labels would still teach `R, AG` almost
# everywhere. Kept for a backbone whose decomposer writes useful parts.
set -euo pipefail
M=${MARAG:-.venv/bin/marag}
CFG=configs/qwen/jade-train.yaml
CF=runs/data/splits-cf
OUT=${OUT:-runs/crossfit}
stages=("$@"); [ ${#stages[@]} -eq 0 ] && stages=(labels sft dev report)
has() { local s; for s in "${stages[@]}"; do [ "$s" = "$1" ] && return 0; done; return 1; }
# run_team_s200.sh draws the splits before it looks at its stages, so a stage name it does
# not know ("splits") only draws them
[ -f $CF/fold-a-s320.jsonl ] || bash docs/results/qwen-runs/crossfit/run_team_s200.sh splits
SFT=$OUT/jade-sft-plans-a/policy          # family 1's warm start (labels AG, R, AG)
SFT_QDS=$OUT/jade-sft-plans-qds-a/policy  # this one (labels AG, R, AG, QDS)

if has labels; then  # AG and R-AG are family 1's runs (run_team_s200.sh labels)
  for plan in AG R-AG; do
    [ -f $OUT/plans-a/$plan/metrics.json ] || bash docs/results/qwen-runs/crossfit/run_team_s200.sh labels
  done
  $M eval --config $CFG --method jade --dataset $CF/fold-a-s320.jsonl \
      --set "method.root_plan=[QDS]" --set "method.sub_plan=[R, AG]" \
      --out $OUT/plans-a/QDS --no-progress
fi
if has sft; then  # family 1's settings and order; a tie goes to the plan listed first, so QDS (the dearest) last
  $M sft --config $CFG --method jade --set sft.min_f1=0.5 --set sft.epochs=2 \
      --plans "R, AG=$OUT/plans-a/R-AG/traces.jsonl" "AG=$OUT/plans-a/AG/traces.jsonl" \
              "QDS=$OUT/plans-a/QDS/traces.jsonl" \
      --out $OUT/jade-sft-plans-qds-a --no-progress
fi
if has dev; then  # family 1's warm start: trained by run_team_s200.sh, or its committed copy
  [ -d $SFT ] || { mkdir -p "$(dirname $SFT)"; cp -r docs/results/qwen-runs/crossfit/team-s200/adapters/sft $SFT; }
  $M eval --config $CFG --method jade --adapter $SFT_QDS --dataset $CF/dev.jsonl \
      --out $OUT/dev/warm-qds --no-progress
  $M eval --config $CFG --method jade --adapter $SFT --dataset $CF/dev.jsonl \
      --out $OUT/dev/warm --no-progress
fi
if has report; then
  .venv/bin/python benchmarks/paired_bootstrap.py $OUT/dev/warm-qds $OUT/dev/warm --by-dataset
  $M report $OUT/dev/warm-qds $OUT/dev/warm --out $OUT/dev/report
fi
