#!/bin/bash
# IRCoT's direct reader with whole step prompts kept in the prefix cache (Role.cache_prompt)
# and each step's decoding stopped once its first sentence is settled (stop_when), on the same
# 30 questions as run-2026-11-29.sh, the cross-fitting evaluation paused (SIGSTOP) for the
# duration. From the repo root; dtype auto (float32 on a CPU without native bfloat16).
set -u
PIDS=$(pgrep -f "marag eval" | tr '\n' ' ')
echo "pausing: $PIDS"; [ -n "$PIDS" ] && kill -STOP $PIDS
trap '[ -n "$PIDS" ] && kill -CONT $PIDS; echo resumed' EXIT
date -u
t0=$(date +%s.%N)
.venv/bin/marag eval --dataset runs/fm39/q30.jsonl --method ircot --model qwen2.5-coder-0.5b \
  --index runs/data/all-bm25 --set method.ircot_top_k=5 --set method.ircot_answer=direct \
  --no-progress --out runs/fm39/direct-fast
python3 -c "import json;print(json.dumps({'run_s': $(date +%s.%N)-$t0}))" > runs/fm39/direct-fast.wall.json
cat runs/fm39/direct-fast.wall.json; date -u
