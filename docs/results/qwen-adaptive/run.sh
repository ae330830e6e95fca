#!/usr/bin/env bash
# Issue 39: Adaptive-RAG's classifier for Qwen2.5-Coder-0.5B, so the tables' Adaptive-RAG row
# runs (marag table ... --adapter adaptive-rag=runs/qwen-adaptive/classifier/policy).
# Adaptive-RAG (Jeong et al., 2024, S3.2) labels each training question with the simplest
# strategy that answers it: A = no retrieval (llm-only), B = single-step (vanilla), C =
# multi-step (ircot); a question none answers takes its dataset's bias (B single-hop, C
# multi-hop). marag runs the three strategies on a seeded, stratified 200 of fold A
# (docs/results/qwen-runs/SPLITS.md; never the confirmation set the tables use), then LoRA-SFTs
# the shared backbone's classifier role on the labels. Written 2026-11-27, not run yet (the
# CPU went to the tables). Every stage resumes (marag eval/sft do).
# From the repository root:  bash docs/results/qwen-adaptive/run.sh
set -euo pipefail
M=${MARAG:-.venv/bin/marag}
OUT=${OUT:-runs/qwen-adaptive}
N=${N:-200}
CF=runs/data/splits-cf
COMMON=(--model qwen2.5-coder-0.5b --index runs/data/all-bm25 --set method.top_k=5 --no-progress)
[ -f $CF/fold-a.jsonl ] || .venv/bin/python benchmarks/make_crossfit_splits.py --out $CF
mkdir -p $OUT
[ -f $OUT/train.jsonl ] || .venv/bin/python benchmarks/stratified_subsample.py \
    $CF/fold-a.jsonl -n $N --seed 39 --out $OUT/train
for m in llm-only vanilla ircot; do
  $M eval --method $m --dataset $OUT/train.jsonl "${COMMON[@]}" --out $OUT/strategy-$m
done
# A three-way label on a short prompt needs little capacity: LoRA rank 8 (a 17 MB float32
# adapter, half of rank 16's) and 2 epochs over the 200 labels.
$M sft --method adaptive-rag --model qwen2.5-coder-0.5b --set method.top_k=5 \
    --set sft.lora.r=8 --set sft.lora.alpha=16 --set sft.epochs=2 \
    --plans A=$OUT/strategy-llm-only/traces.jsonl B=$OUT/strategy-vanilla/traces.jsonl \
            C=$OUT/strategy-ircot/traces.jsonl \
    --exclude-ids $CF/train-a.exclude.ids --out $OUT/classifier --no-progress
