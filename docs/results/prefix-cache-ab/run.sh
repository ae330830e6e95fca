#!/bin/bash
# A/B of the prefix-cache change (aa2c7d9) on ircot, 16 questions in flight; the label chain paused
cd /work/main
kill -STOP -32338
trap 'kill -CONT -32338' EXIT
for side in before after; do
  if [ $side = before ]; then src=/tmp/before; else src=/work/main; fi
  PYTHONPATH=$src/src .venv/bin/python $src/benchmarks/e2e_profile.py \
    --dataset runs/data/splits-cf/fold-a-s320.jsonl --index runs/data/all-bm25 \
    --methods ircot --limit 16 --settings float32:16:16 \
    --json runs/prefix-ab/$side.json > runs/prefix-ab/$side.md 2> runs/prefix-ab/$side.err
done
