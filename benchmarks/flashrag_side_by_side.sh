#!/usr/bin/env bash
# marag `vanilla` and FlashRAG's standard RAG pipeline, back to back on the same questions
# (N of each dataset from line OFFSET, file order; OFFSET=100 is the development split of
# issue 21), model, corpus (each dataset's own), BM25 top-5, greedy, 32 new tokens. FlashRAG
# runs through ../shared/tools/flashrag_peer.py unchanged (see its FLASHRAG_PEER.md for the
# venv): it takes the first n questions of <data-dir>/<name>.questions.jsonl, so with an
# OFFSET it gets a data dir of its own holding those questions and a link to the corpus.
# marag runs through `marag eval`, model load included in wall.
#
#   PEERENV=/path/venv FLASHRAG_MIRROR=/path/FlashRAG.git [OFFSET=100] \
#       [PEER_MODEL_DIR=~/.cache/marag/models/qwen2.5-coder-0.5b MARAG_ARGS="--model ..."] \
#       benchmarks/flashrag_side_by_side.sh OUT [N]
set -euo pipefail
OUT=${1:?output directory}; N=${2:-50}; OFFSET=${OFFSET:-0}
ROOT=$(cd "$(dirname "$0")/.." && pwd); DATA=${DATA:-$ROOT/../shared/data}
MARAG=${MARAG:-$ROOT/.venv/bin/marag}
export PEER_MODEL_DIR=${PEER_MODEL_DIR:-$HOME/.cache/marag/models/smollm2} HF_HUB_OFFLINE=1
mkdir -p "$OUT"
for ds in ${DATASETS:-nq_open hotpotqa}; do
  if [ "$OFFSET" = 0 ]; then
    QS="$OUT/$ds.first$N.jsonl"; PEERDATA="$DATA"
    head -n "$N" "$DATA/$ds.questions.jsonl" > "$QS"
  else
    QS="$OUT/$ds.from$OFFSET.n$N.jsonl"; PEERDATA="$OUT/peer-data"
    sed -n "$((OFFSET + 1)),$((OFFSET + N))p" "$DATA/$ds.questions.jsonl" > "$QS"
    mkdir -p "$PEERDATA"; cp "$QS" "$PEERDATA/$ds.questions.jsonl"
    ln -sf "$(cd "$DATA" && pwd)/$ds.corpus.jsonl" "$PEERDATA/$ds.corpus.jsonl"
  fi
  [ -d "$OUT/$ds-bm25" ] || "$MARAG" index build --corpus "$DATA/$ds.corpus.jsonl" \
      --out "$OUT/$ds-bm25" --no-progress
  # FlashRAG first, then marag, one after the other
  "$PEERENV/bin/python" "$ROOT/../shared/tools/flashrag_peer.py" --modes rag \
      --data-dir "$PEERDATA" "$ds" "$N" "$OUT/flashrag-$ds" > "$OUT/flashrag-$ds.log" 2>&1
  rm -rf "$OUT/marag-$ds"
  start=$(date +%s.%N)
  "$MARAG" eval --dataset "$QS" --method vanilla --index "$OUT/$ds-bm25" \
      --out "$OUT/marag-$ds" --no-progress ${MARAG_ARGS:-} > "$OUT/marag-$ds.log" 2>&1
  end=$(date +%s.%N)
  echo "{\"dataset\": \"$ds\", \"marag_wall_s\": $(echo "$end - $start" | bc)}" \
      > "$OUT/marag-$ds.wall.json"
done
echo "done: $OUT"
