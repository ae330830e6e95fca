#!/bin/bash
# Real runs for docs/results: every method x {hotpotqa, nq_open}, embedded SmolLM2-135M, BM25.
# Sized for a shared 2-core CPU: 5 questions each, 3 passages per retrieval, 4 MMOA candidates,
# 2 M-ASK turns.
cd /work/main
for m in llm-only vanilla mmoa-rag mao-arag jade m-ask; do
  for ds in hotpotqa nq_open; do
    echo "=== $m $ds $(date +%T)"
    /usr/bin/time -f "wall %e s" .venv/bin/marag eval --config configs/$m.yaml \
      --dataset ../shared/data/$ds.questions.jsonl --index runs/idx/$ds-bm25 \
      --limit 5 --seed 0 --concurrency 5 --no-progress \
      --set method.top_k=3 --set retrieval.k=3 --set method.candidates=4 --set method.max_turns=2 \
      --out runs/smollm2/$m-$ds
  done
done
echo "=== done $(date +%T)"
