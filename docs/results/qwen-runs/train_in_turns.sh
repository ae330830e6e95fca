#!/usr/bin/env bash
# Run a `marag train` config in turns of STEP iterations on a shared box: each turn holds
# LOCK (flock) so other heavy jobs (benchmarks, test suites) take their turn between them,
# and each resumes from the last checkpoint with train.iterations raised by STEP (a changed
# iteration count is the one change a resume accepts). With train.eval_every = STEP every
# turn ends with the development evaluation and <out>/best keeps the best checkpoint.
# Not for a config with train.lr_schedule: cosine (its horizon is train.iterations, which the
# turns raise): run those in one `marag train` call, which resumes the same way.
#
#   docs/results/qwen-runs/train_in_turns.sh CONFIG OUT STEP MAX [LOCK]
set -euo pipefail
CONFIG=${1:?config}; OUT=${2:?out}; STEP=${3:?iterations per turn}; MAX=${4:?last iteration}
LOCK=${5:-/work/heavy.lock}
MARAG=${MARAG:-.venv/bin/marag}
done_iters() {
  local latest="$OUT/checkpoints/latest"
  if [ -f "$latest" ]; then sed 's/iter-0*//' "$latest"; else echo 0; fi
}
while :; do
  start=$(done_iters)
  [ "$start" -ge "$MAX" ] && break
  target=$(( (start / STEP + 1) * STEP )); [ "$target" -gt "$MAX" ] && target=$MAX
  echo "$(date -u +%FT%TZ) turn: iterations $start -> $target"
  flock "$LOCK" "$MARAG" train --config "$CONFIG" --out "$OUT" --no-progress \
      --set "train.iterations=$target"
  sleep 20   # let a waiting job take the lock
done
echo "$(date -u +%FT%TZ) done: $OUT at iteration $(done_iters)"
