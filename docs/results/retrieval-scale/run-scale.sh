#!/bin/bash
# 1M and 4M in one hold of the box's lock, so the growth is measured on one quiet box.
# (/work/main at 43cd90f; /work/wt-bm25: branch bm25-prune, see run-bm25cmp.sh. The 1M
# MaxScore row of this script ran code mid-edit and is not reported; run-bm25cmp.sh's is.)
set -x
cd /work/main
export HF_HUB_OFFLINE=1
B=".venv/bin/python benchmarks/retrieval_scale.py"
for N in 1000000 4000000; do
  W=/tmp/marag-bench/scale-$N
  rm -rf $W
  $B gen --work $W --n $N --dim 768 || exit 1
  $B import --work $W || exit 1
  $B compress --work $W --tier ivf-sq8 || exit 1
  $B compress --work $W --tier opq-ivfpq || exit 1
  $B serve --work $W --tier ivf-sq8 --nprobe 64
  $B serve --work $W --tier ivf-sq8 --nprobe 16
  $B serve --work $W --tier opq-ivfpq --nprobe 64 --rerank 100
  $B serve --work $W --tier opq-ivfpq --nprobe 16 --rerank 100
  $B serve --work $W --tier flat-mmap --single 5
  $B bm25-build --work $W
  $B bm25-serve --work $W
  (cd /work/wt-bm25 && PYTHONPATH=/work/wt-bm25/src /work/main/.venv/bin/python benchmarks/retrieval_scale.py bm25-serve --work $W)
  $B bm25-serve --work $W
  rm -f $W/flat.index.cached 2>/dev/null
done
echo DONE
