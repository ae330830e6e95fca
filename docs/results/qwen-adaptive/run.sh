#!/usr/bin/env bash
# Issue 39: Adaptive-RAG's classifier for Qwen2.5-Coder-0.5B, so the tables' Adaptive-RAG row
# runs (committed as docs/results/qwen-adaptive/classifier, `--adapter qwen-adaptive`).
# Adaptive-RAG (Jeong et al., 2024, S3.2) labels each training question with the simplest
# strategy that answers it: A = no retrieval (llm-only), B = single-step (vanilla), C =
# multi-step (ircot); a question none answers takes its dataset's bias (B single-hop, C
# multi-hop). marag runs the three strategies on a seeded, stratified 200 of fold A
# (docs/results/qwen-runs/SPLITS.md; never the confirmation set the tables use), then LoRA-SFTs
# the shared backbone's classifier role on the labels. First run 2026-11-28; its state is in
# README.md beside it. Every stage resumes (marag eval/sft do).
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
for m in llm-only vanilla; do
  $M eval --method $m --dataset $OUT/train.jsonl "${COMMON[@]}" --out $OUT/strategy-$m
done
# C (ircot, the costly one: ~45 s a question here) runs only where it can change a label: the
# single-hop questions neither A nor B answered (a multi-hop one is C either way), which gives
# the same labels (adaptive_unanswered.py). The list is written once; DONE names traces of an
# earlier C run whose questions it leaves out. (The committed run's list was written before
# the single-hop rule, so its C ran on all 146 questions A and B left.)
[ -f $OUT/unanswered.jsonl ] || .venv/bin/python benchmarks/adaptive_unanswered.py \
    $OUT/train.jsonl --a $OUT/strategy-llm-only/traces.jsonl \
    --b $OUT/strategy-vanilla/traces.jsonl --done ${DONE:-} --out $OUT/unanswered.jsonl
$M eval --method ircot --dataset $OUT/unanswered.jsonl "${COMMON[@]}" --out $OUT/strategy-ircot
cat $OUT/strategy-ircot*/traces.jsonl > $OUT/c-traces.jsonl
# A three-way label on a short prompt needs little capacity: LoRA rank 8 (a 17 MB float32
# adapter, half of rank 16's) and 2 epochs over the 200 labels.
$M sft --method adaptive-rag --model qwen2.5-coder-0.5b --set method.top_k=5 \
    --set sft.lora.r=8 --set sft.lora.alpha=16 --set sft.epochs=2 \
    --plans A=$OUT/strategy-llm-only/traces.jsonl B=$OUT/strategy-vanilla/traces.jsonl \
            C=$OUT/c-traces.jsonl \
    --exclude-ids $CF/train-a.exclude.ids --out $OUT/classifier --no-progress
