#!/bin/bash
# IRCoT's direct reader (553c991) on the same 30 questions, right after run-2026-11-29.sh's
# runs, the cross-fitting evaluation paused (SIGSTOP) for the duration. From the repo root.
# NAME (default direct): the run's name under runs/fm39 (run-2026-11-29-fast.sh sets it);
# EXTRA (default none): more `marag eval` arguments (README, update 2026-11-30, sets them).
set -u
NAME=${NAME:-direct}
PIDS=$(pgrep -f "marag eval" | tr '\n' ' ')
echo "pausing: $PIDS"; [ -n "$PIDS" ] && kill -STOP $PIDS
trap '[ -n "$PIDS" ] && kill -CONT $PIDS; echo resumed' EXIT
date -u
t0=$(date +%s.%N)
.venv/bin/marag eval --dataset runs/fm39/q30.jsonl --method ircot --model qwen2.5-coder-0.5b \
  --index runs/data/all-bm25 --set method.ircot_top_k=5 --set method.ircot_answer=direct \
  ${EXTRA:-} --no-progress --out runs/fm39/$NAME
python3 -c "import json;print(json.dumps({'run_s': $(date +%s.%N)-$t0}))" > runs/fm39/$NAME.wall.json
cat runs/fm39/$NAME.wall.json; date -u
