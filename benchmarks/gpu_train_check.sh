#!/bin/bash
# The GPU training path, once, on a lent GPU machine (no network, no real weights): `marag
# train` in bf16 on CUDA with a random-initialised model of Qwen2.5-Coder-0.5B's shape (its
# config and tokenizer travel in SHAPE; the weights are drawn there), over a BM25 index of
# the fixture corpus. Three runs, each two iterations of 32 traces (8 questions x 4 samples):
#   1. one process, local rollouts (`marag train`);
#   2. the DDP launcher, `accelerate launch --config_file configs/accelerate/ddp-gpu.yaml`
#      with one process (one GPU lent: NCCL will not put two ranks on one device);
#   3. FSDP2, `configs/accelerate/fsdp-gpu.yaml` with one process and rollouts from
#      `marag serve-llm` on the same GPU (train.rollout: server, the adapter reloaded after
#      each update).
# SIZE=7b builds the model at Qwen2.5-7B's shape instead (hidden 3584, 28 layers, 28 query
# and 4 key-value heads, MLP 18944, vocabulary 152064, untied head; drawn on the device);
# RUNS may also name rollcache (train.rollout_cache_prompts off and on, below),
# single-gc (the single run with train.gradient_checkpointing=true),
# single-static and single-gc-static (rollouts in the local decoder's fixed slots, STATIC
# columns, each step a CUDA-graph replay).
# Every metrics row has seconds.<phase> and, on a GPU, peak_gib.<phase> (the most memory
# PyTorch held in the phase). Issue 40's check, as two device calls (each under the
# 600 s limit of a call; the 7B runs get T1=240 s each by default):
#   SIZE=7b RUNS="single single-gc" bash benchmarks/gpu_train_check.sh
#   RUNS=fsdp bash benchmarks/gpu_train_check.sh          (0.5B, rollouts from a server)
# Prerequisites it expects beside the tree: .whl/ (the wheels the machine lacks: pydantic,
# bm25s, PyStemmer, fastapi, ...) and SHAPE. Writes $OUT/<run>.metrics.csv and $OUT/<run>.log
# (the runs themselves in /tmp/gpu-runs).
#   device run: bash benchmarks/gpu_train_check.sh   (carry .whl and .devcarry)
# Set-up here first (docs/results/gpu-check/README.md has the commands): the wheels with
# `pip download --python-version 3.12 --platform manylinux... -d .whl`, SHAPE with the config
# and tokenizer files of ~/.cache/marag/models/qwen2.5-coder-0.5b; both folders listed in
# .git/info/exclude. Try it here on a CPU with DEVICE=cpu DTYPE=float32 LAYERS=2 PY=.venv/bin/python.
set -x
OUT=${OUT:-/tmp/gpu-check}; SHAPE=${SHAPE:-.devcarry/qwen-shape}; DEVICE=${DEVICE:-cuda}
DTYPE=${DTYPE:-bfloat16}; ITERS=${ITERS:-2}; LAYERS=${LAYERS:-}; SIZE=${SIZE:-0.5b}
W=/tmp/gpu-work; R=/tmp/gpu-runs; rm -rf $R; mkdir -p $OUT $W $R  # no stale runs of a warm machine
[ "$SIZE" = 7b ] && T1=${T1:-240}
PY=${PY:-python3}
if [ -d .whl ] && ! $PY -c "import pydantic, bm25s" 2>/dev/null; then
  $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
      --target /tmp/site .whl/*.whl || exit 1
  export PYTHONPATH=/tmp/site
fi
export PYTHONPATH=$PWD/src${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv || true
rm -rf $W/model
$PY - "$SHAPE" "$W/model" "$LAYERS" "$SIZE" "$DEVICE" <<'PYEOF' || exit 1
import shutil, sys, pathlib, torch, transformers
shape, out, layers, size, device = sys.argv[1:6]
cfg = transformers.AutoConfig.from_pretrained(shape)
if size == "7b":  # Qwen2.5-7B(-Instruct)'s config.json values
    for k, v in dict(hidden_size=3584, intermediate_size=18944, num_hidden_layers=28,
                     num_attention_heads=28, num_key_value_heads=4, max_window_layers=28,
                     vocab_size=152064, tie_word_embeddings=False).items():
        setattr(cfg, k, v)
    if getattr(cfg, "layer_types", None):
        cfg.layer_types = [cfg.layer_types[0]] * 28
    torch.set_default_device(device)  # 15 GB of bf16 weights: drawn where they will run
if layers:
    cfg.num_hidden_layers = int(layers)  # a shallower copy, for trying the script on a CPU
    if getattr(cfg, "layer_types", None):
        cfg.layer_types = cfg.layer_types[:int(layers)]
torch.manual_seed(0)
model = transformers.AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16)
model.save_pretrained(out)
for f in pathlib.Path(shape).iterdir():
    if f.name != "config.json":
        shutil.copy(f, out)
print("random model:", sum(p.numel() for p in model.parameters()) / 1e6, "M parameters,",
      cfg.num_hidden_layers, "layers; torch", torch.__version__, "transformers", transformers.__version__)
PYEOF
cat tests/fixtures/qa/*.corpus.jsonl > $W/corpus.jsonl
$PY -m marag.cli index build --corpus $W/corpus.jsonl --out $W/bm25 || exit 1
DATA=(--set "retrieval.index=$W/bm25" --set method.top_k=5
  --set 'train.datasets=[tests/fixtures/qa/hotpotqa.questions.jsonl,tests/fixtures/qa/nq_open.questions.jsonl]'
  --set train.holdout_per_dataset=0 --set train.questions_per_iteration=${QPI:-8})
COMMON=("${DATA[@]}" --set train.iterations=$ITERS --set train.samples_per_question=${SPQ:-4}
  --set train.save_every=1 --no-progress)
LOCAL=(--config configs/jade-train.yaml --set "llms.default.model=$W/model"
  --set "llms.default.device=$DEVICE" --set "llms.default.dtype=$DTYPE")
RUNS=${RUNS:-single ddp fsdp}   # which of the three to run
LAUNCH=($PY -m accelerate.commands.launch --num_processes 1)
# train NAME SECONDS COMMAND...: one run afresh (a warm machine keeps /tmp), its log in $OUT
train() {
  local name=$1 limit=$2; shift 2
  rm -rf $R/$name
  timeout $limit "$@" --out $R/$name 2>&1 | tee $OUT/$name.log | grep -v Warning
  echo "$name rc ${PIPESTATUS[0]}"
}
GC=(--set train.gradient_checkpointing=true)
ST=(--set llms.default.static_cache=${STATIC:-2048})  # fixed-slot rollouts (CUDA graphs)
for run in $RUNS; do
  case $run in
    # 1. one process, local rollouts; -gc: gradient checkpointing; -static: the local
    # decoder's fixed slots, each step a CUDA-graph replay (marag.llm.hf_static)
    single) train $run ${T1:-200} $PY -m marag.cli train "${LOCAL[@]}" "${COMMON[@]}" ;;
    single-gc) train $run ${T1:-200} $PY -m marag.cli train "${LOCAL[@]}" "${COMMON[@]}" "${GC[@]}" ;;
    single-static) train $run ${T1:-200} $PY -m marag.cli train "${LOCAL[@]}" "${COMMON[@]}" "${ST[@]}" ;;
    single-gc-static) train $run ${T1:-200} $PY -m marag.cli train "${LOCAL[@]}" "${COMMON[@]}" \
        "${GC[@]}" "${ST[@]}" ;;
    # 2. the DDP launcher, one process
    ddp) train ddp ${T2:-150} "${LAUNCH[@]}" --config_file configs/accelerate/ddp-gpu.yaml \
        --module marag.cli train "${LOCAL[@]}" "${COMMON[@]}" ;;
    # 3. FSDP2 with server rollouts (the server's base model keeps its folder's name; the
    # adapter is served as the rollout LLM's model name, marag-policy); SERVER_STATIC=N
    # gives the server fixed-slot decoding
    fsdp)
      $PY -m marag.cli serve-llm --model $W/model --device $DEVICE --dtype $DTYPE --port 8000 \
          --allow-lora-updates --max-batch-size 16 --static-cache ${SERVER_STATIC:-0} \
          > $OUT/serve-llm.log 2>&1 &
      SERVER=$!
      for i in $(seq 60); do curl -sf http://127.0.0.1:8000/health >/dev/null && break; sleep 2; done
      train fsdp ${T3:-150} "${LAUNCH[@]}" --config_file configs/accelerate/fsdp-gpu.yaml \
          --module marag.cli train --config configs/jade-server-train.yaml --set "llms.policy.model=$W/model" \
          --set "llms.policy.device=$DEVICE" --set "llms.policy.dtype=$DTYPE" "${COMMON[@]}"
      kill $SERVER ;;
    # 4. train.rollout_cache_prompts off and on, twice each, on this device
    # (benchmarks/rollout_prompt_cache.py: one rollout of 8 questions a mode, no update): BGM's
    # bridge (4 samples, the frozen reader on a copy of the model) and the answer generator of
    # `vanilla` (8 samples, as configs/qwen/reader-grpo-fold-a.yaml); replies capped at 16
    # tokens, as short as a trained model's (random weights never stop early)
    rollcache)
      M=(model=$W/model device=$DEVICE dtype=$DTYPE); SETS=()
      for kv in "${M[@]}"; do SETS+=(--set "llms.default.$kv"); done
      BGM=("${SETS[@]}"); for kv in "${M[@]}"; do BGM+=(--set "llms.reader.$kv"); done
      for spec in "bgm configs/bgm-train.yaml 4" "reader configs/jade-train.yaml 8"; do
        set -- $spec
        if [ $1 = bgm ]; then X=("${BGM[@]}" --set method.max_tokens.DS=16)
        else X=("${SETS[@]}" --set method.name=vanilla --set 'train.roles=[AG]'); fi
        timeout ${T4:-150} $PY benchmarks/rollout_prompt_cache.py --config $2 "${X[@]}" "${DATA[@]}" \
            --set method.max_tokens.AG=16 --set train.samples_per_question=$3 \
            --set train.eval_dataset=null --order off,on,off,on --json $OUT/rollcache-$1.json \
            2>&1 | tee $OUT/rollcache-$1.log | grep -v Warning
      done ;;
    *) echo "unknown run $run"; exit 2 ;;
  esac
done
for r in $RUNS; do
  if [ -f $R/$r/metrics.csv ]; then
    cp $R/$r/metrics.csv $OUT/$r.metrics.csv; echo "== $r"; cat $R/$r/metrics.csv
  fi
done
