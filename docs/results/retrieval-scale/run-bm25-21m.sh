#!/usr/bin/env bash
# BM25 at wiki-18's size (21,015,324 passages, synthetic: the real shared passages repeated
# under distinct ids), each step its own process under the box's lock; ~45 min and ~31 GB of
# disk (11.5 GB corpus, 18.8 GB index) on the 2-core box. Raw lines: scale-21015324-bm25.jsonl.
# The serve rows of 2026-11-25/26 were measured in the order below (the first two with the
# code before release_every existed, which behaves as --release-every 0).
set -eu
B=".venv/bin/python benchmarks/retrieval_scale.py"; W=${W:-/work/bench/scale-21m}; L=${L:-/work/heavy.lock}
flock $L $B gen --work $W --n 21015324 --dim 0
flock $L $B bm25-build --work $W
flock $L $B bm25-serve --work $W --release-every 0
flock $L $B bm25-serve --work $W --release-every 0 --per-term-bounds
flock $L $B bm25-serve --work $W --release-every 64
flock $L $B bm25-serve --work $W                      # the default, 16
