#!/usr/bin/env bash
# Issue 38, family 1's comparisons 1-4 on the full protocol of docs/results/qwen-runs/SPLITS.md
# (both fold models, n = 1,580; its addendum of 2026-11-28 22:07 UTC): the recipe of the
# reduced protocol (run_team_s200.sh: plan labels on a stratified 320 of the fold, SFT, then 3
# iterations of run 2c's PPO, the iteration-3 adapter kept; every setting fixed in advance, no
# development choice), trained once on fold A (run_team_s200.sh made it; its committed
# team-s200/adapters, float32) and once on fold B (rounded to bfloat16, as stashed); each
# fold model answers every question of the other fold, and `vanilla` answers all 1,580 once. Every stage resumes (marag eval, sft
# and train do): run again after a kill; it spans several CPU sessions on the 2-core box
# (about 7 CPU hours: fold B's labels ~20 min, SFT ~40, PPO ~45; each row on 790 questions
# ~40). A session may start on a machine without runs/: the script first restores what
# earlier sessions stashed in $STASH (benchmarks/stash_runs.py: traces gzipped, adapters in
# bfloat16) and stashes again after every stage. Before a session ends, stash an evaluation
# that is running (`bash ...run_team_full.sh stash`: its finished questions resume) and commit
# $STASH; a training stage (sft-b, ppo-b) is carried only once it has finished, so a killed one
# starts over. A restored run resumes in a checkout at the same path (marag eval names its
# dataset by absolute path). From the repository root:
#   bash docs/results/qwen-runs/crossfit/run_team_full.sh [stage ...]
#   stages: labels-b sft-b ppo-b team reader warm vanilla report (stash: only save)
# Change this file only by writing a new copy and renaming it over this one (mv): a running
# bash reads its script as it goes, so an edit in place breaks the run that reads it.
set -euo pipefail
M=${MARAG:-.venv/bin/marag}
PY=${PYTHON:-.venv/bin/python}
CFG=configs/qwen/jade-train.yaml  # Qwen2.5-Coder-0.5B, its prompt profile, BM25 top-5 pooled
CF=runs/data/splits-cf
OUT=${OUT:-runs/crossfit}
D=docs/results/qwen-runs/crossfit/team-s200
STASH=docs/results/qwen-runs/crossfit/full
stages=("$@"); [ ${#stages[@]} -eq 0 ] && stages=(labels-b sft-b ppo-b team reader warm vanilla report)
has() { local s; for s in "${stages[@]}"; do [ "$s" = "$1" ] && return 0; done; return 1; }
other() { [ "$1" = a ] && echo b || echo a; }

[ -f $CF/fold-b.jsonl ] || $PY benchmarks/make_crossfit_splits.py --out $CF
[ -f $CF/fold-b-s320.jsonl ] || $PY benchmarks/stratified_subsample.py \
    $CF/fold-b.jsonl -n 320 --seed 0 --out $CF/fold-b-s320
mkdir -p $OUT
[ -d $STASH ] && $PY benchmarks/stash_runs.py restore $STASH $OUT
stash() {  # what a fresh machine needs to resume: fold B's adapters, every evaluation's traces
  $PY benchmarks/stash_runs.py save $OUT $STASH --include 'plans-b/*' \
      --include 'jade-sft-plans-b/policy' --include 'jade-ppo-b/checkpoints/iter-000003/policy' \
      --include 'team-?-on-?' --include 'reader-?-on-?' --include 'warm-?-on-?' \
      --include 'vanilla-on-?'
}
if has stash; then stash; exit 0; fi
bf16() {  # from here on the fold-B adapter is the stashed one, rounded to bfloat16, on every
  # machine alike: what a later stage reads does not depend on where the stage before ran
  cp $STASH/${1#$OUT/}/adapter_model.safetensors $1/adapter_model.safetensors
}
# the fold-A model: run_team_s200.sh's committed adapters (the same on every machine, so a
# restored evaluation's identity still matches)
SFT_A=$D/adapters/sft; PPO_A=$D/adapters/ppo
SFT_B=$OUT/jade-sft-plans-b/policy; PPO_B=$OUT/jade-ppo-b/checkpoints/iter-000003/policy
sft() { [ "$1" = a ] && echo $SFT_A || echo $SFT_B; }
ppo() { [ "$1" = a ] && echo $PPO_A || echo $PPO_B; }
# Every evaluation of the protocol computes in float32. `dtype: auto` is float32 on a CPU
# without native bfloat16 (the machine that ran labels-b and team-a-on-b) and bfloat16 on one
# with it (an earlier machine of this project), so the rows started later pin float32; the
# rows that started with `auto` (their run identity keeps it) go on only where `auto` still
# means float32.
F32="--set llms.default.dtype=float32"
auto_f32() {  # refuse to go on with a row started under `auto` where it would change precision
  local got; got=$($PY -c 'from marag.llm.dtype import resolve_dtype; print(resolve_dtype("auto", "cpu"))')
  [ "$got" = float32 ] || [ -f "$1/metrics.json" ] || {
    echo "$1 started with dtype auto = float32; here auto = $got. Finish it on a CPU without native" \
         "bfloat16, or start it again with $F32 (its traces moved aside)" >&2; exit 2; }
}

if has labels-b; then  # each fold-B question of the 320 answered by the two fixed plans
  $M eval --config $CFG --method llm-only --dataset $CF/fold-b-s320.jsonl \
      --out $OUT/plans-b/AG --no-progress
  $M eval --config $CFG --method vanilla --dataset $CF/fold-b-s320.jsonl \
      --out $OUT/plans-b/R-AG --no-progress
  stash
fi
# a training stage whose adapter is there (a finished run, or restored from $STASH) is done
if has sft-b; then  # `R, AG` listed first: a tie goes to the plan with documents
  [ -f $SFT_B/adapter_model.safetensors ] || \
  $M sft --config $CFG --method jade --set sft.min_f1=0.5 --set sft.epochs=2 \
      --exclude-ids $CF/train-b.exclude.ids \
      --plans "R, AG=$OUT/plans-b/R-AG/traces.jsonl" "AG=$OUT/plans-b/AG/traces.jsonl" \
      --out $OUT/jade-sft-plans-b --no-progress
  stash; bf16 $SFT_B
fi
if has ppo-b; then  # run 2c's settings, fold B only, 3 iterations
  [ -f $PPO_B/adapter_model.safetensors ] || \
  $M train --config docs/results/qwen-runs/jade-2c/config.yaml \
      --set "llms.default.adapter=[$SFT_B]" \
      --set train.exclude_ids=$CF/train-b.exclude.ids --set train.eval_dataset=null \
      --set train.iterations=3 --out $OUT/jade-ppo-b --no-progress
  stash; bf16 $PPO_B
fi
# Each row is one evaluation (it resumes); stashed after each. The order puts `vanilla` before
# fold B's reader and warm-start rows (2026-11-29 evening): comparisons 1 and 2 need it, so
# the headline comparison can be made as soon as `team-b-on-a` and `vanilla` are in.
team_row() {  # team-a-on-b started under `auto` (float32 there): its identity keeps it
  local f=$1 o; o=$(other $1)
  if [ $f = a ]; then pin=(); auto_f32 $OUT/team-a-on-b; else pin=($F32); fi
  $M eval --config $CFG --method jade --adapter "$(sft $f)" --adapter "$(ppo $f)" "${pin[@]}" \
      --dataset $CF/fold-$o.jsonl --out $OUT/team-$f-on-$o --no-progress
}
reader_row() {
  local f=$1 o; o=$(other $1)
  $M eval --config $CFG --method vanilla --adapter "$(sft $f)" --adapter "$(ppo $f)" $F32 \
      --dataset $CF/fold-$o.jsonl --out $OUT/reader-$f-on-$o --no-progress
}
warm_row() {  # comparison 4: the plan-label warm start alone
  local f=$1 o; o=$(other $1)
  $M eval --config $CFG --method jade --adapter "$(sft $f)" $F32 \
      --dataset $CF/fold-$o.jsonl --out $OUT/warm-$f-on-$o --no-progress
}
vanilla_row() {  # the untrained baseline, once on all 1,580 (a fold at a time)
  $M eval --config $CFG --method vanilla --dataset $CF/fold-$1.jsonl $F32 \
      --out $OUT/vanilla-on-$1 --no-progress
}
if has team; then team_row a; stash; fi
if has reader; then reader_row a; stash; fi
if has warm; then warm_row a; stash; fi
if has team; then team_row b; stash; fi
if has vanilla; then vanilla_row a; stash; vanilla_row b; stash; fi
if has reader; then reader_row b; stash; fi
if has warm; then warm_row b; stash; fi
if has report; then  # family 1 on the 1,580: 95% and 99% intervals, Holm (m = 5)
  P=benchmarks/paired_bootstrap.py
  SR1=docs/results/qwen-search-r1/heldout-foldb200
  V=$OUT/vanilla-on-a,$OUT/vanilla-on-b
  for row in team reader warm vanilla; do  # the reduced protocol's 200 answered again
    new=$OUT/$row-a-on-b; [ $row = vanilla ] && new=$OUT/vanilla-on-b
    if [ -f "$new/metrics.json" ]; then
      $PY benchmarks/answer_agreement.py "$D/$row" "$new" \
          --label "$row: the 200 of fold-b-s200 against the full fold-B run" \
          || echo "$row: the agreement check failed (see above); the comparisons go on"
    fi
  done
  ps=()
  cmp() {  # name, run A, run B (each "fold-A half,fold-B half"): the member and its p
    echo "== comparison $1: $2 - $3"
    local d
    for d in ${2//,/ } ${3//,/ }; do  # a row counts once `marag eval` has written metrics.json
      [ -f "$d/metrics.json" ] || { echo "missing $d: counted with p = 1"; ps+=(1); return; }
    done
    local out; out=$($PY $P "$2" "$3" --by-dataset); echo "$out"
    $PY $P "$2" "$3" --level 0.99 | tail -1
    ps+=("$(echo "$out" | sed -n 2p | sed 's/.*, p //')")
  }
  # halves in the same order: answers of fold A's questions, then fold B's
  cmp 1 $OUT/team-b-on-a,$OUT/team-a-on-b $V
  cmp 2 $OUT/reader-b-on-a,$OUT/reader-a-on-b $V
  cmp 3 $OUT/team-b-on-a,$OUT/team-a-on-b $OUT/reader-b-on-a,$OUT/reader-a-on-b
  cmp 4 $OUT/team-b-on-a,$OUT/team-a-on-b $OUT/warm-b-on-a,$OUT/warm-a-on-b
  cmp 5 $SR1/sr1-sft-a $SR1/sr1-untrained  # still the reduced protocol's (its addendum)
  echo "== Holm over the five (in the order 1-5)"; $PY $P --holm "${ps[@]}"
  # the same family as one Markdown table (the rows' scores per dataset, then 1-5); its Holm
  # step uses full-precision p-values (the lines above parse them as printed, to 2 digits),
  # so where the two differ this table is the record
  $PY benchmarks/family_table.py --out $OUT/report-family1.md \
      --row team "trained team (fold SFT + PPO)" $OUT/team-b-on-a,$OUT/team-a-on-b \
      --row reader "its reader (\`vanilla\`, the same adapters)" $OUT/reader-b-on-a,$OUT/reader-a-on-b \
      --row warm "the plan-label warm start alone" $OUT/warm-b-on-a,$OUT/warm-a-on-b \
      --row vanilla "\`vanilla\`" $V \
      --row sr1sft "\`search-r1\` SFT (reduced protocol, n = 200)" $SR1/sr1-sft-a \
      --row sr1 "\`search-r1\` untrained (reduced protocol)" $SR1/sr1-untrained \
      --compare team vanilla "team - \`vanilla\`" --compare reader vanilla "reader - \`vanilla\`" \
      --compare team reader "team - reader" --compare team warm "team - warm start" \
      --compare sr1sft sr1 "\`search-r1\` SFT - untrained"
  # the planner's workflow mix per dataset, one row per fold model (a plot: workflows.png)
  if [ -f $OUT/team-b-on-a/metrics.json ] && [ -f $OUT/team-a-on-b/metrics.json ]; then
    $M report $OUT/team-b-on-a $OUT/team-a-on-b --out $OUT/report-team
  fi
fi
