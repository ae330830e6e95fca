#!/bin/bash
set -euo pipefail
cd /work/main
export PEERENV=/work/peerenv FLASHRAG_MIRROR=/work/.mirror/RUC-NLPIR+FlashRAG/repo \
  PEER_MODEL_DIR=$HOME/.cache/marag/models/qwen2.5-coder-0.5b MARAG_ARGS="--model qwen2.5-coder-0.5b" \
  QUESTIONS=runs/data/splits-cf/fold-b-s200.jsonl
date -u +"own start %FT%TZ"
benchmarks/flashrag_side_by_side.sh runs/fr-heldout/own
date -u +"pooled start %FT%TZ"
POOLED=runs/data/all.corpus.jsonl POOLED_INDEX=runs/data/all-bm25 SYSTEMS=flashrag \
  benchmarks/flashrag_side_by_side.sh runs/fr-heldout/pooled
date -u +"end %FT%TZ"
