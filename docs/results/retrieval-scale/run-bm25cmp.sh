#!/bin/bash
# Serving figures again on a quiet box (the first 4M serve steps overlapped a test run), then
# BM25 serving, exhaustive (main) against MaxScore (wt-bm25 7266e18), alternating, 1M and 4M
# (/work/wt-bm25 was a worktree of branch bm25-prune at 7266e18, merged into main as b33d6f2;
# /work/main was at 5d639cf, before the merge: the exhaustive sum)
set -x
export HF_HUB_OFFLINE=1
B="/work/main/.venv/bin/python benchmarks/retrieval_scale.py"
cd /work/main
for N in 1000000 4000000; do
  W=/tmp/marag-bench/scale-$N
  $B serve --work $W --tier ivf-sq8 --nprobe 64
  $B serve --work $W --tier ivf-sq8 --nprobe 16
  $B serve --work $W --tier opq-ivfpq --nprobe 64 --rerank 100
  $B serve --work $W --tier opq-ivfpq --nprobe 16 --rerank 100
  $B serve --work $W --tier flat-mmap --single 5
done
for N in 1000000 4000000; do
  W=/tmp/marag-bench/scale-$N
  for r in 1 2; do
    (cd /work/main && $B bm25-serve --work $W)
    (cd /work/wt-bm25 && PYTHONPATH=/work/wt-bm25/src /work/main/.venv/bin/python benchmarks/retrieval_scale.py bm25-serve --work $W)
  done
done
echo DONE
