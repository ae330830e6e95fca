#!/bin/bash
# Real runs for docs/results: every method x {hotpotqa, nq_open}, embedded SmolLM2-135M, BM25,
# 20 questions each, 3 passages per retrieval, 4 MMOA candidates, 2 M-ASK turns. mao-arag's
# executors run behind `marag serve-llm` on :8001 (its shipped config), started first.
cd /work/main
.venv/bin/marag serve-llm --port 8001 > runs/smollm2-20/serve-llm.log 2>&1 &
SERVER=$!
until curl -sf 127.0.0.1:8001/v1/models > /dev/null; do sleep 1; done
for m in llm-only vanilla jade mao-arag mmoa-rag m-ask; do
  for ds in hotpotqa nq_open; do
    echo "=== $m $ds $(date +%T)"
    /usr/bin/time -f "wall %e s" .venv/bin/marag eval --config configs/$m.yaml \
      --dataset ../shared/data/$ds.questions.jsonl --index runs/idx/$ds-bm25 \
      --limit 20 --seed 0 --concurrency 20 --no-progress \
      --set method.top_k=3 --set method.candidates=4 --set method.max_turns=2 \
      --out runs/smollm2-20/$m-$ds
  done
done
kill $SERVER
echo "=== done $(date +%T)"
