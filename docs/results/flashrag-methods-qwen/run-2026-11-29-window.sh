#!/bin/bash
# IRCoT side by side in one window (2026-11-29, evening): FlashRAG's IRCOTPipeline, then marag's
# `ircot_answer=direct` (run-2026-11-29-direct.sh's command), back to back on the same 30
# questions, model, corpus and machine, the cross-fitting evaluation paused (SIGSTOP) for the
# whole window, so that the speed ratio comes from one run of this box (whose speed drifts).
# Outputs: runs/fm39/fr30-window (FlashRAG), runs/fm39/direct-window (marag). From the repo root.
set -u
PIDS=$(pgrep -f "marag eval" | tr '\n' ' ')
echo "pausing crossfit: $PIDS"; [ -n "$PIDS" ] && kill -STOP $PIDS
trap '[ -n "$PIDS" ] && kill -CONT $PIDS; echo resumed crossfit' EXIT
date -u
t0=$(date +%s.%N)
env HF_HUB_OFFLINE=1 FLASHRAG_MIRROR=/work/.mirror/RUC-NLPIR+FlashRAG/repo \
  /work/peerenv/bin/python benchmarks/flashrag_methods_peer.py run runs/fm39/q30.jsonl \
  runs/fm39/fr30-window --corpus runs/data/all.corpus.jsonl \
  --model $HOME/.cache/marag/models/qwen2.5-coder-0.5b --topk 5 --max-iter 5
python3 -c "import json;print(json.dumps({'run_s': $(date +%s.%N)-$t0, 'rc': $?}))" > runs/fm39/fr30-window.wall.json
cat runs/fm39/fr30-window.wall.json; date -u
NAME=direct-window bash "$(dirname "$0")/run-2026-11-29-direct.sh"
