#!/usr/bin/env bash
# BM25 at wiki-18's size (21,015,324 passages, synthetic: the real shared passages repeated
# under distinct ids), each step its own process under the box's lock; ~45 min and ~31 GB of
# disk (11.5 GB corpus, 18.8 GB index) on the 2-core box. Raw lines: scale-21015324-bm25.jsonl.
# The serve rows of 2026-11-25/26 ran in this order: stored bounds with the pages kept
# (the code before release_every), per-term bounds with the pages kept, stored with
# release_every 64, stored with release_every 16 (the default now).
set -eu
B=".venv/bin/python benchmarks/retrieval_scale.py"; W=${W:-/work/bench/scale-21m}; L=${L:-/work/heavy.lock}
flock $L $B gen --work $W --n 21015324 --dim 0
flock $L $B bm25-build --work $W
flock $L $B bm25-serve --work $W --keep-pages
flock $L $B bm25-serve --work $W --keep-pages --per-term-bounds
flock $L $B bm25-serve --work $W
