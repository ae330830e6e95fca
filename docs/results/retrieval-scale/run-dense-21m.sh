#!/bin/bash
# The dense tiers at wiki-18's size (21,015,324 x 768) on a disk that cannot hold the 64.6 GB
# flat file: gen --sparse writes the corpus and the flat file as a hole of its size (header
# and length right, no rows on disk), compress --synthetic makes the rows again from the
# generator block by block (the same rows gen writes at 1M and 4M), so ivf-sq8 (~16 GB) and
# opq-ivfpq (~1.6 GB) are built and served for real. The flat file itself, flat-mmap and the
# re-rank that reads it are not measured this way (a hole reads as zeros). Each step alone
# under the box's lock; raw lines go to $W/results.jsonl. A build step whose output is
# already in $W is skipped, so a rerun goes on where the last one stopped (FRESH=1 starts
# over); the serving rows run every time, for the tiers in SERVE (default both; e.g.
# SERVE=opq-ivfpq serves only that one).
set -x
cd /work/main
export HF_HUB_OFFLINE=1
B=".venv/bin/python benchmarks/retrieval_scale.py"
W=${W:-/work/bench/scale-21m-dense}
L=/work/heavy.lock
[ "${FRESH:-0}" = 1 ] && rm -rf $W
[ -f $W/synthetic.json ] || flock $L $B gen --work $W --n 21015324 --dim 768 --sparse || exit 1
[ -f $W/index/manifest.json ] || flock $L $B import --work $W || exit 1
[ -f $W/index/tiers/ivf-sq8.faiss ] || flock $L $B compress --work $W --tier ivf-sq8 --synthetic || exit 1
SERVE=${SERVE:-ivf-sq8 opq-ivfpq}
if [[ " $SERVE " == *" ivf-sq8 "* ]]; then
  flock $L $B serve --work $W --tier ivf-sq8 --nprobe 64
  flock $L $B serve --work $W --tier ivf-sq8 --nprobe 16
fi
[ -f $W/index/tiers/opq-ivfpq.faiss ] || flock $L $B compress --work $W --tier opq-ivfpq --synthetic || exit 1
if [[ " $SERVE " == *" opq-ivfpq "* ]]; then
  flock $L $B serve --work $W --tier opq-ivfpq --nprobe 64 --rerank 0
  flock $L $B serve --work $W --tier opq-ivfpq --nprobe 16 --rerank 0
fi
echo DONE
