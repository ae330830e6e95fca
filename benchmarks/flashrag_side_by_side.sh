#!/usr/bin/env bash
# marag `vanilla` and FlashRAG's standard RAG pipeline, back to back on the same questions
# (N of each dataset from line OFFSET, file order; OFFSET=100 is the development split of
# issue 21), model, corpus (each dataset's own), BM25 top-5, greedy, 32 new tokens. FlashRAG
# runs through ../shared/tools/flashrag_peer.py unchanged (see its FLASHRAG_PEER.md for the
# venv): it takes the first n questions of <data-dir>/<name>.questions.jsonl, so with an
# OFFSET it gets a data dir of its own holding those questions and a link to the corpus.
# marag runs through `marag eval`, model load included in wall.
#
#   PEERENV=/path/venv FLASHRAG_MIRROR=/path/FlashRAG.git [OFFSET=100] \
#       [PEER_MODEL_DIR=~/.cache/marag/models/qwen2.5-coder-0.5b MARAG_ARGS="--model ..."] \
#       benchmarks/flashrag_side_by_side.sh OUT [N]
#
# A questions file instead of slices (QUESTIONS=file, records with a "dataset" field, e.g.
# runs/data/splits-cf/fold-b-s200.jsonl): each dataset of DATASETS (default: every dataset
# the file names, in order of first appearance) gets all of its questions in that file, in
# file order, over its own corpus; N is ignored. With POOLED=corpus.jsonl as well there is one
# run instead, named `pooled`: every question of the file over that one corpus (both
# systems; POOLED_INDEX = an existing marag index of that corpus, otherwise one is built in
# OUT); split it by dataset afterwards (benchmarks/side_by_side_table.py --by-dataset).
# SYSTEMS (default "flashrag marag") runs only the systems it names.
#
#   QUESTIONS=runs/data/splits-cf/fold-b-s200.jsonl [POOLED=runs/data/all.corpus.jsonl \
#       POOLED_INDEX=runs/data/all-bm25] ... benchmarks/flashrag_side_by_side.sh OUT
set -euo pipefail
OUT=${1:?output directory}; N=${2:-50}; OFFSET=${OFFSET:-0}
ROOT=$(cd "$(dirname "$0")/.." && pwd); DATA=${DATA:-$ROOT/../shared/data}
MARAG=${MARAG:-$ROOT/.venv/bin/marag}; SYSTEMS=${SYSTEMS:-flashrag marag}
export PEER_MODEL_DIR=${PEER_MODEL_DIR:-$HOME/.cache/marag/models/smollm2} HF_HUB_OFFLINE=1
mkdir -p "$OUT"
abspath() { echo "$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"; }
if [ -n "${QUESTIONS:-}" ]; then
  [ -f "$QUESTIONS" ] || { echo "QUESTIONS=$QUESTIONS: no such file" >&2; exit 2; }
  if [ -n "${POOLED:-}" ]; then
    NAMES=pooled
  else
    NAMES=${DATASETS:-$(python3 -c 'import json, sys
seen = []
for line in open(sys.argv[1]):
    if line.strip():
        ds = json.loads(line)["dataset"]
        seen += [ds] if ds not in seen else []
print(" ".join(seen))' "$QUESTIONS")}
  fi
else
  NAMES=${DATASETS:-nq_open hotpotqa}
fi
for ds in $NAMES; do
  CORPUS="$DATA/$ds.corpus.jsonl"; INDEX="$OUT/$ds-bm25"
  if [ -n "${QUESTIONS:-}" ]; then
    PEERDATA="$OUT/peer-data"; QS="$PEERDATA/$ds.questions.jsonl"; mkdir -p "$PEERDATA"
    if [ "$ds" = pooled ]; then
      cp "$QUESTIONS" "$QS"; CORPUS=$POOLED; INDEX=${POOLED_INDEX:-$INDEX}
    else
      python3 -c 'import json, sys
for line in open(sys.argv[1]):
    if line.strip() and json.loads(line)["dataset"] == sys.argv[2]:
        sys.stdout.write(line if line.endswith("\n") else line + "\n")' \
          "$QUESTIONS" "$ds" > "$QS"
    fi
    [ -s "$QS" ] || { echo "$QUESTIONS holds no question of $ds" >&2; exit 2; }
    ln -sf "$(abspath "$CORPUS")" "$PEERDATA/$ds.corpus.jsonl"
    N=$(grep -c . "$QS")
  elif [ "$OFFSET" = 0 ]; then
    QS="$OUT/$ds.first$N.jsonl"; PEERDATA="$DATA"
    head -n "$N" "$DATA/$ds.questions.jsonl" > "$QS"
  else
    QS="$OUT/$ds.from$OFFSET.n$N.jsonl"; PEERDATA="$OUT/peer-data"
    sed -n "$((OFFSET + 1)),$((OFFSET + N))p" "$DATA/$ds.questions.jsonl" > "$QS"
    mkdir -p "$PEERDATA"; cp "$QS" "$PEERDATA/$ds.questions.jsonl"
    ln -sf "$(cd "$DATA" && pwd)/$ds.corpus.jsonl" "$PEERDATA/$ds.corpus.jsonl"
  fi
  # FlashRAG first, then marag, one after the other
  if [[ " $SYSTEMS " == *" flashrag "* ]]; then
    "$PEERENV/bin/python" "$ROOT/../shared/tools/flashrag_peer.py" --modes rag \
        --data-dir "$PEERDATA" "$ds" "$N" "$OUT/flashrag-$ds" > "$OUT/flashrag-$ds.log" 2>&1
  fi
  if [[ " $SYSTEMS " == *" marag "* ]]; then
    [ -d "$INDEX" ] || "$MARAG" index build --corpus "$CORPUS" --out "$INDEX" --no-progress
    rm -rf "$OUT/marag-$ds"
    start=$(date +%s.%N)
    "$MARAG" eval --dataset "$QS" --method vanilla --index "$INDEX" \
        --out "$OUT/marag-$ds" --no-progress ${MARAG_ARGS:-} > "$OUT/marag-$ds.log" 2>&1
    end=$(date +%s.%N)
    echo "{\"dataset\": \"$ds\", \"marag_wall_s\": $(echo "$end - $start" | bc)}" \
        > "$OUT/marag-$ds.wall.json"
  fi
done
echo "done: $OUT"
