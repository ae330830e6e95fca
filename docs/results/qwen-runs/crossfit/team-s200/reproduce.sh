#!/usr/bin/env bash
# Re-answer a seeded sample of fold-b-s200 with the committed rows' settings and adapters, and
# say how many answers and what F1 match the committed traces (issue 38: "the figures reproduce
# from a fresh clone on a sample"). From the repository root of a clone, after the README's
# set-up, the model and the pooled BM25 index:
#   .venv/bin/marag models install qwen2.5-coder-0.5b
#   mkdir -p runs/data && cat ../shared/data/{hotpotqa,2wikimultihopqa,musique,nq_open}.corpus.jsonl \
#       > runs/data/all.corpus.jsonl
#   .venv/bin/marag index build --corpus runs/data/all.corpus.jsonl --out runs/data/all-bm25
#   N=20 bash docs/results/qwen-runs/crossfit/team-s200/reproduce.sh [team reader warm vanilla untrained]
# (the splits are drawn here if missing). A few minutes a row at N = 20 on 2 cores.
set -euo pipefail
M=${MARAG:-.venv/bin/marag}
PY=${PYTHON:-.venv/bin/python}
N=${N:-20}
D=docs/results/qwen-runs/crossfit/team-s200
CF=runs/data/splits-cf
OUT=${OUT:-runs/reproduce-team-s200}
CFG=configs/qwen/jade-train.yaml
rows=("$@"); [ ${#rows[@]} -eq 0 ] && rows=(team vanilla untrained)
[ -f $CF/fold-b-s200.jsonl ] || { [ -f $CF/fold-b.jsonl ] || $PY benchmarks/make_crossfit_splits.py --out $CF
  $PY benchmarks/stratified_subsample.py $CF/fold-b.jsonl -n 200 --seed 38 --out $CF/fold-b-s200; }
for row in "${rows[@]}"; do
  case $row in
    team) args=(--method jade --adapter $D/adapters/sft --adapter $D/adapters/ppo); ref=$D/team ;;
    reader) args=(--method vanilla --adapter $D/adapters/sft --adapter $D/adapters/ppo); ref=$D/reader ;;
    warm) args=(--method jade --adapter $D/adapters/sft); ref=$D/warm ;;
    vanilla) args=(--method vanilla); ref=$D/vanilla ;;
    untrained) args=(--method jade); ref=$D/jade-untrained ;;
    *) echo "unknown row $row (team reader warm vanilla untrained)" >&2; exit 2 ;;
  esac
  [ -d $ref ] || { echo "$row: no committed row in $ref, skipped"; continue; }
  $M eval --config $CFG "${args[@]}" --dataset $CF/fold-b-s200.jsonl --limit $N --seed 0 \
      --out $OUT/$row --no-progress
  $PY benchmarks/answer_agreement.py $OUT/$row $ref --label "$row (N = $N)"
done
