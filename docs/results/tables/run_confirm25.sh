#!/usr/bin/env bash
# The papers' tables on the confirmation split, 25 questions per dataset (docs/results/tables/README.md).
# Resumable: a cell is an eval run folder under $T/runs; rerun to go on. The jade, m-ask and
# mao-arag tables share top_k 5, so a row they share runs once; mmoa-rag's (top_k 10) has its own
# folder. From the repository root, after the set-up at the top of configs/qwen/jade-train.yaml:
#   bash docs/results/tables/run_confirm25.sh [paper[:rows] ...]
# e.g.  bash docs/results/tables/run_confirm25.sh m-ask:deepnote mao-arag:search-o1,mao-arag-untrained mmoa-rag
# LIMIT (default 25) sets the questions per dataset; a smaller seeded sample is the first LIMIT
# of the 25 (Python's random.sample draws them in order), but its cells are folders of their own.
set -euo pipefail
M=${MARAG:-.venv/bin/marag}
LIMIT=${LIMIT:-25}
IDS=docs/results/qwen-runs/splits-cf/confirm.ids
jobs=("$@"); [ ${#jobs[@]} -eq 0 ] && jobs=(jade m-ask mao-arag mmoa-rag)
for job in "${jobs[@]}"; do
  paper=${job%%:*}; rows=; [ "$job" != "$paper" ] && rows=${job#*:}
  T=runs/tables-confirm; [ "$paper" = mmoa-rag ] && T=runs/tables-confirm-k10
  [ "$LIMIT" = 25 ] || T=$T-n$LIMIT
  echo "== $(date -u +%FT%TZ) $paper ${rows:-all rows} -> $T"
  $M table "$paper" --model qwen2.5-coder-0.5b --index runs/data/all-bm25 --ids $IDS \
      --limit $LIMIT --out $T --no-progress ${rows:+--rows $rows}
  mkdir -p $T/out-$paper && cp $T/table.md $T/table.csv $T/f1_vs_cost.png $T/out-$paper/
done
echo "== $(date -u +%FT%TZ) done"
