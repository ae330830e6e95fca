#!/usr/bin/env bash
# marag `vanilla` and FlashRAG's standard RAG pipeline, back to back on the same questions
# (the first N of each dataset), model, corpus (each dataset's own), BM25 top-5, greedy,
# 32 new tokens. FlashRAG runs through ../shared/tools/flashrag_peer.py unchanged (see its
# FLASHRAG_PEER.md for the venv); marag through `marag eval`, model load included in wall.
#
#   PEERENV=/path/venv FLASHRAG_MIRROR=/path/FlashRAG.git benchmarks/flashrag_side_by_side.sh OUT [N]
set -euo pipefail
OUT=${1:?output directory}; N=${2:-50}
ROOT=$(cd "$(dirname "$0")/.." && pwd); DATA=${DATA:-$ROOT/../shared/data}
MARAG=${MARAG:-$ROOT/.venv/bin/marag}
export PEER_MODEL_DIR=${PEER_MODEL_DIR:-$HOME/.cache/marag/models/smollm2} HF_HUB_OFFLINE=1
mkdir -p "$OUT"
for ds in ${DATASETS:-nq_open hotpotqa}; do
  head -n "$N" "$DATA/$ds.questions.jsonl" > "$OUT/$ds.first$N.jsonl"
  [ -d "$OUT/$ds-bm25" ] || "$MARAG" index build --corpus "$DATA/$ds.corpus.jsonl" \
      --out "$OUT/$ds-bm25" --no-progress
  # FlashRAG first, then marag, one after the other
  "$PEERENV/bin/python" "$ROOT/../shared/tools/flashrag_peer.py" --modes rag \
      --data-dir "$DATA" "$ds" "$N" "$OUT/flashrag-$ds" > "$OUT/flashrag-$ds.log" 2>&1
  rm -rf "$OUT/marag-$ds"
  start=$(date +%s.%N)
  "$MARAG" eval --dataset "$OUT/$ds.first$N.jsonl" --method vanilla --index "$OUT/$ds-bm25" \
      --out "$OUT/marag-$ds" --no-progress ${MARAG_ARGS:-} > "$OUT/marag-$ds.log" 2>&1
  end=$(date +%s.%N)
  echo "{\"dataset\": \"$ds\", \"marag_wall_s\": $(echo "$end - $start" | bc)}" \
      > "$OUT/marag-$ds.wall.json"
done
echo "done: $OUT"
