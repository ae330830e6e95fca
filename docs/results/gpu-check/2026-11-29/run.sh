#!/bin/bash
# 2026-11-29 device check: the hf decoder's growing cache (RoomyLayer, in-place appends since
# 2cecf0e), its shared-prefix cache (one-pass prefills since 31305ad) and a training run on CUDA.
set -x
export XLA_PYTHON_CLIENT_PREALLOCATE=false TF_FORCE_GPU_ALLOW_GROWTH=true HF_HUB_OFFLINE=1
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD/src PYTHONUNBUFFERED=1
python3 -c "import torch, transformers; print(torch.__version__, transformers.__version__)" | tee $OUT/versions.txt
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee -a $OUT/versions.txt
timeout 120 python3 benchmarks/gpu_decode_speed.py --shape .devcarry/qwen-shape --rows 32 --batch 16 --static 2048 \
  > $OUT/decode-0.5b-bf16.jsonl 2> $OUT/decode-0.5b-bf16.err; tail -5 $OUT/decode-0.5b-bf16.jsonl
timeout 100 python3 benchmarks/gpu_decode_speed.py --shape .devcarry/qwen-shape --rows 32 --batch 16 --static 2048 \
  --dtype float32 --temperature 0 --shared-prefix 300 --modes growing,prefix,static \
  > $OUT/decode-0.5b-fp32-greedy.jsonl 2> $OUT/decode-0.5b-fp32-greedy.err; tail -5 $OUT/decode-0.5b-fp32-greedy.jsonl
OUT=$OUT RUNS=single T1=170 timeout 200 bash benchmarks/gpu_train_check.sh > $OUT/train.log 2>&1
tail -5 $OUT/train.log; ls $OUT
