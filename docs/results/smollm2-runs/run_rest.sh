#!/bin/bash
# Same settings as run_all.sh; order changed so every method gets hotpotqa first.
cd /work/main
while kill -0 22813 2>/dev/null; do sleep 2; done
for pair in jade:hotpotqa m-ask:hotpotqa mao-arag:hotpotqa jade:nq_open m-ask:nq_open mao-arag:nq_open; do
  m=${pair%%:*}; ds=${pair##*:}
  echo "=== $m $ds $(date +%T)"
  /usr/bin/time -f "wall %e s" .venv/bin/marag eval --config configs/$m.yaml \
    --dataset ../shared/data/$ds.questions.jsonl --index runs/idx/$ds-bm25 \
    --limit 5 --seed 0 --concurrency 5 --no-progress \
    --set method.top_k=3 --set retrieval.k=3 --set method.candidates=4 --set method.max_turns=2 \
    --out runs/smollm2/$m-$ds
done
echo "=== done $(date +%T)"
