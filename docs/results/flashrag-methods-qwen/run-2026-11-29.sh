#!/bin/bash
# IRCoT side by side, 2026-11-29: the crossfit evaluation paused (SIGSTOP) for the duration.
set -u
cd /work/main
PIDS=$(pgrep -f "marag eval" | tr '\n' ' ')
echo "pausing crossfit: $PIDS"; [ -n "$PIDS" ] && kill -STOP $PIDS
trap '[ -n "$PIDS" ] && kill -CONT $PIDS; echo resumed crossfit' EXIT
date -u
t() { local name=$1; shift; local t0=$(date +%s.%N); "$@"; local rc=$?; local t1=$(date +%s.%N);
      python3 -c "import json;print(json.dumps({'run_s': $t1-$t0, 'rc': $rc}))" > runs/fm39/$name.wall.json; cat runs/fm39/$name.wall.json; }
Q=runs/fm39/q30.jsonl
COMMON="--dataset $Q --method ircot --model qwen2.5-coder-0.5b --index runs/data/all-bm25 --set method.ircot_top_k=5 --no-progress"
# marag first: the checkout's code (it was f1695ce, the replaced shared-prompt reader; at a later
# commit "new" runs that commit's default reader), then 7a42af9 (the CoT reader's own
# instruction) from a worktree; the third, newcot, was stopped 5 s after it started, to give the
# CPU back sooner
[ -d /tmp/ircot-old/src ] || { echo "first: git worktree add /tmp/ircot-old 7a42af9" >&2; exit 1; }
t new .venv/bin/marag eval $COMMON --out runs/fm39/new
t old env PYTHONPATH=/tmp/ircot-old/src .venv/bin/python -m marag.cli eval $COMMON --out runs/fm39/old
t newcot .venv/bin/marag eval $COMMON --set method.ircot_answer=cot --out runs/fm39/newcot
date -u
if [ "${FLASHRAG:-1}" = 1 ]; then
t fr env HF_HUB_OFFLINE=1 FLASHRAG_MIRROR=/work/.mirror/RUC-NLPIR+FlashRAG/repo \
  /work/peerenv/bin/python benchmarks/flashrag_methods_peer.py run $Q runs/fm39/fr30 \
  --corpus runs/data/all.corpus.jsonl --model $HOME/.cache/marag/models/qwen2.5-coder-0.5b --topk 5 --max-iter 5
fi
date -u
