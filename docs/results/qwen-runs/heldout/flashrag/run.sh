#!/bin/sh
# FlashRAG 0.1.2 standard RAG on the same 200 held-out questions, the pooled corpus (its own
# BM25 index over it), top-5, greedy, 32 new tokens, batch 1, the same converted Qwen weights.
cd /work/main
PEER_MODEL_DIR=/root/.cache/marag/models/qwen2.5-coder-0.5b FLASHRAG_BASIC_CONFIG=/work/peerenv/basic_config.yaml \
HF_HUB_OFFLINE=1 flock /work/heavy.lock /work/peerenv/bin/python ../shared/tools/flashrag_peer.py \
  --data-dir runs/eval/qwen-heldout/peer-data --modes rag heldout 200 runs/eval/qwen-heldout/flashrag
