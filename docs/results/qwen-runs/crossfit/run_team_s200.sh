#!/usr/bin/env bash
# Issue 38, comparisons 1-4 on the reduced protocol (docs/results/qwen-runs/SPLITS.md,
# addendum of 2026-11-28): run 2c's recipe (`qwen-jade-2c`) replayed on fold A (plan-label SFT, then 3
# iterations of run 2c's PPO, the iteration-3 adapter kept), then five rows on the 200
# questions of fold-b-s200: the trained team, `vanilla` with its adapters (the reader part),
# untrained `jade` and the warm start alone (RL against it), and `vanilla` re-run under the
# same config and code (its earlier row, comparison 5's in
# docs/results/qwen-search-r1/heldout-foldb200/vanilla, is the check). Every stage resumes (marag
# eval/sft/train do): run again after a kill. From the repository root, about 3 CPU hours:
#   bash docs/results/qwen-runs/crossfit/run_team_s200.sh [stage ...]
#   stages: labels sft ppo team reader untrained warm vanilla report
set -euo pipefail
M=${MARAG:-.venv/bin/marag}
CFG=configs/qwen/jade-train.yaml  # Qwen2.5-Coder-0.5B, its prompt profile, BM25 top-5 pooled
CF=runs/data/splits-cf
OUT=${OUT:-runs/crossfit}
VANILLA=${VANILLA:-docs/results/qwen-search-r1/heldout-foldb200/vanilla}
stages=("$@"); [ ${#stages[@]} -eq 0 ] && stages=(labels sft ppo team reader untrained warm vanilla report)
has() { local s; for s in "${stages[@]}"; do [ "$s" = "$1" ] && return 0; done; return 1; }

[ -f $CF/fold-b.jsonl ] || .venv/bin/python benchmarks/make_crossfit_splits.py --out $CF
[ -f $CF/fold-b-s200.jsonl ] || .venv/bin/python benchmarks/stratified_subsample.py \
    $CF/fold-b.jsonl -n 200 --seed 38 --out $CF/fold-b-s200
[ -f $CF/fold-a-s320.jsonl ] || .venv/bin/python benchmarks/stratified_subsample.py \
    $CF/fold-a.jsonl -n 320 --seed 0 --out $CF/fold-a-s320
mkdir -p $OUT
SFT=$OUT/jade-sft-plans-a/policy
PPO=$OUT/jade-ppo-a/checkpoints/iter-000003/policy

if has labels; then  # each fold-A question answered by the two fixed plans
  $M eval --config $CFG --method llm-only --dataset $CF/fold-a-s320.jsonl \
      --out $OUT/plans-a/AG --no-progress
  $M eval --config $CFG --method vanilla --dataset $CF/fold-a-s320.jsonl \
      --out $OUT/plans-a/R-AG --no-progress
fi
if has sft; then  # `R, AG` listed first: a tie goes to the plan with documents
  $M sft --config $CFG --method jade --set sft.min_f1=0.5 --set sft.epochs=2 \
      --plans "R, AG=$OUT/plans-a/R-AG/traces.jsonl" "AG=$OUT/plans-a/AG/traces.jsonl" \
      --out $OUT/jade-sft-plans-a --no-progress
fi
if has ppo; then  # run 2c's settings, fold A only, 3 iterations
  $M train --config docs/results/qwen-runs/jade-2c/config.yaml \
      --set "llms.default.adapter=[$SFT]" \
      --set train.exclude_ids=$CF/train-a.exclude.ids --set train.eval_dataset=null \
      --set train.iterations=3 --out $OUT/jade-ppo-a --no-progress
fi
if has team; then
  $M eval --config $CFG --method jade --adapter $SFT --adapter $PPO \
      --dataset $CF/fold-b-s200.jsonl --out $OUT/team-a-on-b200 --no-progress
fi
if has reader; then
  $M eval --config $CFG --method vanilla --adapter $SFT --adapter $PPO \
      --dataset $CF/fold-b-s200.jsonl --out $OUT/reader-a-on-b200 --no-progress
fi
if has untrained; then
  $M eval --config $CFG --method jade --dataset $CF/fold-b-s200.jsonl \
      --out $OUT/jade-untrained-on-b200 --no-progress
fi
if has warm; then  # comparison 4: the plan-label warm start alone
  $M eval --config $CFG --method jade --adapter $SFT \
      --dataset $CF/fold-b-s200.jsonl --out $OUT/warm-a-on-b200 --no-progress
fi
if has vanilla; then  # the baseline re-run under the new rows' config and code (2nd amendment)
  $M eval --config $CFG --method vanilla --dataset $CF/fold-b-s200.jsonl \
      --out $OUT/vanilla-on-b200 --no-progress
fi
if has report; then  # family 1 on the 200: 95% and 99% intervals, sensitivity, Holm (m = 5)
  B=.venv/bin/python; P=benchmarks/paired_bootstrap.py
  OLD=docs/results/qwen-runs/splits-cf/fold-b-s200.old-dev.ids
  SR1=docs/results/qwen-search-r1/heldout-foldb200
  V=$OUT/vanilla-on-b200
  [ -f "$V/metrics.json" ] && $B benchmarks/answer_agreement.py "$VANILLA" "$V" \
      --label "comparison 5's vanilla row against the re-run"
  ps=()
  cmp() {  # name, run A, run B: prints the member and appends its p (1 when a row is missing)
    echo "== comparison $1: $2 - $3"
    # a row counts once `marag eval` has finished it (metrics.json is written last)
    if [ ! -f "$2/metrics.json" ] || [ ! -f "$3/metrics.json" ]; then
      echo "missing row: counted with p = 1"; ps+=(1); return; fi
    local out; out=$($B $P "$2" "$3" --by-dataset); echo "$out"
    $B $P "$2" "$3" --level 0.99 | tail -1
    $B $P "$2" "$3" --exclude-ids $OLD | tail -1 | sed 's/^/without the 33 old-development questions: /'
    ps+=("$(echo "$out" | sed -n 2p | sed 's/.*, p //')")
  }
  cmp 1 $OUT/team-a-on-b200 $V
  cmp 2 $OUT/reader-a-on-b200 $V
  cmp 3 $OUT/team-a-on-b200 $OUT/reader-a-on-b200
  cmp 4 $OUT/team-a-on-b200 $OUT/warm-a-on-b200
  cmp 5 $SR1/sr1-sft-a $SR1/sr1-untrained
  echo "== Holm over the five (in the order 1-5)"; $B $P --holm "${ps[@]}"
fi
