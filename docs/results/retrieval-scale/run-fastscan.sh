#!/bin/bash
# The fast-scan PQ tier (opq-ivfpq-fs) beside the 8-bit one (opq-ivfpq): recall on real
# vectors (the pooled shared corpora, MiniLM), both tiers' speed on one synthetic 1M set in
# one run, then opq-ivfpq-fs at wiki-18's size (21,015,324 x 768, built from the generator as
# run-dense-21m.sh does). Each step alone under the box's lock; raw lines in each work
# folder's results.jsonl / recall-fs.jsonl.
set -x
cd /work/main
export HF_HUB_OFFLINE=1
L=/work/heavy.lock
B=".venv/bin/python benchmarks/retrieval_scale.py"
R=${R:-/work/bench/tier-recall}
[ -f $R/dense/manifest.json ] || flock $L .venv/bin/python benchmarks/tier_recall.py encode --work $R || exit 1
[ -s $R/recall-fs.jsonl ] || flock $L .venv/bin/python benchmarks/tier_recall.py measure --work $R --tiers opq-ivfpq opq-ivfpq-fs \
  --pq-m 48 --fs-m 64 96 --nprobe 16 32 64 --rerank 0 50 100 200 --out recall-fs.jsonl || exit 1
W=${W1:-/work/bench/scale-1m}
if [ ! -f $W/index/manifest.json ]; then
  flock $L $B gen --work $W --n 1000000 --dim 768 || exit 1
  flock $L $B import --work $W || exit 1
fi
[ -f $W/index/tiers/opq-ivfpq.faiss ] || flock $L $B compress --work $W --tier opq-ivfpq || exit 1
[ -f $W/index/tiers/opq-ivfpq-fs.faiss ] || flock $L $B compress --work $W --tier opq-ivfpq-fs || exit 1
# (SKIP_1M_SERVE=1 when these lines are already in $W/results.jsonl)
if [ -z "$SKIP_1M_SERVE" ]; then
  for T in opq-ivfpq opq-ivfpq-fs; do
    for P in 64 16; do
      flock $L $B serve --work $W --tier $T --nprobe $P --rerank 0
      flock $L $B serve --work $W --tier $T --nprobe $P --rerank 100
    done
  done
fi
W=${W21:-/work/bench/scale-21m-dense}
[ -f $W/index/tiers/opq-ivfpq-fs.faiss ] || flock $L $B compress --work $W --tier opq-ivfpq-fs --synthetic || exit 1
flock $L $B serve --work $W --tier opq-ivfpq-fs --nprobe 64 --rerank 0
flock $L $B serve --work $W --tier opq-ivfpq-fs --nprobe 16 --rerank 0
echo DONE
