#!/bin/bash
# dev choice then held-out, with the code of commit 0d9e0d9 (worktree /work/exp)
cd /work/main
export PYTHONPATH=/work/exp/src
while pgrep -f "marag train --config configs/qwen/search-r1-grpo-fold-a" >/dev/null; do sleep 10; done
M=.venv/bin/marag; BASE=configs/qwen/search-r1-grpo-train.yaml; CF=runs/data/splits-cf
GRPO=$(ls -d runs/train/sr1-grpo-a/checkpoints/iter-* | tail -1)/policy
echo "GRPO adapter: $GRPO"
$M eval --config $BASE --method search-r1 --adapter runs/train/sr1-sft-a/policy --adapter "$GRPO" \
  --dataset $CF/dev.jsonl --limit 40 --seed 0 --out runs/eval/sr1-grpo-a-dev40 --no-progress
CHOSEN=$(python3 -c "
import json
s=json.load(open('runs/eval/sr1-sft-a-dev40/metrics.json'))['f1']
g=json.load(open('runs/eval/sr1-grpo-a-dev40/metrics.json'))['f1']
print('grpo' if g > s else 'sft')")
echo "dev40 choice: $CHOSEN"; echo $CHOSEN > runs/eval/sr1-chosen.txt
if [ "$CHOSEN" = grpo ]; then A=(--adapter runs/train/sr1-sft-a/policy --adapter "$GRPO")
else A=(--adapter runs/train/sr1-sft-a/policy); fi
$M eval --config $BASE --method search-r1 "${A[@]}" --dataset $CF/fold-b-s200.jsonl \
  --out runs/eval/sr1-$CHOSEN-a-foldb200 --no-progress
$M eval --config $BASE --method search-r1 --dataset $CF/fold-b-s200.jsonl \
  --out runs/eval/sr1-untrained-foldb200 --no-progress
$M eval --config $BASE --method vanilla --dataset $CF/fold-b-s200.jsonl \
  --out runs/eval/vanilla-foldb200 --no-progress
.venv/bin/python benchmarks/paired_bootstrap.py runs/eval/sr1-$CHOSEN-a-foldb200 runs/eval/sr1-untrained-foldb200
echo CHAIN DONE
