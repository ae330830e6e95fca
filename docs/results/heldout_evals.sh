#!/bin/bash
# Held-out evaluation (100 questions, 25 per dataset, never trained on) with the training code
# snapshot. Usage: heldout_evals.sh NAME [marag eval options...]
cd /work/main
export HF_HUB_OFFLINE=1 PYTHONPATH=${SNAP:-/work/wt/runA/src}
name=$1; shift
exec /work/main/.venv/bin/python -m marag.cli eval --config ${CFG:-/work/wt/runA/configs/jade-train.yaml} \
  --dataset runs/train/jade-A/splits/heldout.jsonl --out runs/eval/heldout/$name --no-progress "$@"
