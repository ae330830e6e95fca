#!/bin/bash
set -euo pipefail
cd /work/main
export PEERENV=/work/peerenv FLASHRAG_MIRROR=/work/.mirror/RUC-NLPIR+FlashRAG/repo \
  PEER_MODEL_DIR=$HOME/.cache/marag/models/qwen2.5-coder-0.5b MARAG_ARGS="--model qwen2.5-coder-0.5b"
date -u +"pooled-head start %FT%TZ"
QUESTIONS=runs/data/splits-cf/fold-b-s200.jsonl POOLED=runs/data/all.corpus.jsonl POOLED_INDEX=runs/data/all-bm25 \
  SYSTEMS=marag benchmarks/flashrag_side_by_side.sh runs/fr-heldout/pooled-head
date -u +"dev start %FT%TZ"
QUESTIONS=runs/data/splits-cf/dev.jsonl DATASETS="hotpotqa musique" \
  benchmarks/flashrag_side_by_side.sh runs/fr-heldout/dev-own
date -u +"end %FT%TZ"
