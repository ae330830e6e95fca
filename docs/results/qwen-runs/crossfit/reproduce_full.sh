#!/usr/bin/env bash
# Re-answer a seeded sample of a full-protocol row (run_team_full.sh) with its settings and
# adapters, and say how many answers and what F1 match the committed traces in full/ (issue 38:
# "the figures reproduce from a fresh clone on a sample"). From the repository root of a clone,
# after the README's set-up, the model and the pooled BM25 index:
#   .venv/bin/marag models install qwen2.5-coder-0.5b
#   mkdir -p runs/data && cat ../shared/data/{hotpotqa,2wikimultihopqa,musique,nq_open}.corpus.jsonl \
#       > runs/data/all.corpus.jsonl
#   .venv/bin/marag index build --corpus runs/data/all.corpus.jsonl --out runs/data/all-bm25
#   N=20 bash docs/results/qwen-runs/crossfit/reproduce_full.sh [team-a-on-b reader-a-on-b ...]
# Rows: {team,reader,warm}-{a-on-b,b-on-a}, vanilla-on-{a,b}; a row not committed yet is
# skipped. Every row runs in float32, as the protocol's did (SPLITS.md, addendum of
# 2026-11-29); the fold-B adapters are the committed bfloat16 copies the protocol read.
set -euo pipefail
M=${MARAG:-.venv/bin/marag}
PY=${PYTHON:-.venv/bin/python}
N=${N:-20}
C=docs/results/qwen-runs/crossfit
FULL=$C/full
CF=runs/data/splits-cf
OUT=${OUT:-runs/reproduce-full}
CFG=configs/qwen/jade-train.yaml
rows=("$@"); [ ${#rows[@]} -eq 0 ] && rows=(team-a-on-b vanilla-on-b)
[ -f $CF/fold-a.jsonl ] || $PY benchmarks/make_crossfit_splits.py --out $CF
SFT_A=$C/team-s200/adapters/sft; PPO_A=$C/team-s200/adapters/ppo
SFT_B=$FULL/jade-sft-plans-b/policy; PPO_B=$FULL/jade-ppo-b/checkpoints/iter-000003/policy
for row in "${rows[@]}"; do
  case $row in
    *-a-on-b) sft=$SFT_A; ppo=$PPO_A; fold=b ;;
    *-b-on-a) sft=$SFT_B; ppo=$PPO_B; fold=a ;;
    vanilla-on-a|vanilla-on-b) fold=${row#vanilla-on-} ;;
    *) echo "unknown row $row" >&2; exit 2 ;;
  esac
  case $row in
    team-*) args=(--method jade --adapter $sft --adapter $ppo) ;;
    reader-*) args=(--method vanilla --adapter $sft --adapter $ppo) ;;
    warm-*) args=(--method jade --adapter $sft) ;;
    vanilla-*) args=(--method vanilla) ;;
    *) echo "unknown row $row" >&2; exit 2 ;;
  esac
  [ -f $FULL/$row/traces.jsonl.gz ] || { echo "$row: not committed in $FULL yet, skipped"; continue; }
  $M eval --config $CFG "${args[@]}" --set llms.default.dtype=float32 \
      --dataset $CF/fold-$fold.jsonl --limit $N --seed 0 --out $OUT/$row --no-progress
  $PY benchmarks/answer_agreement.py $OUT/$row $FULL/$row --label "$row (N = $N)"
done
