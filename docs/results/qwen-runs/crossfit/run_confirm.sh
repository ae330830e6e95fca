#!/usr/bin/env bash
# Issue 38: which fold-A adapter becomes `--adapter qwen-jade`, and its one confirmation test,
# as stated in docs/results/qwen-runs/SPLITS.md (addendum 2026-11-30 04:20 UTC). Stages:
#   choose  W (fold A's plan-label SFT under `jade`, row warm-a-on-b) or G (fold A's reader plus
#           family 3's GRPO adapter, row reader-grpo-a-on-b), whichever has the higher mean F1
#           on fold B's 790 (a tie goes to W); writes $OUT/confirm-choice.txt
#   eval    `jade` with the chosen adapters, then `vanilla`, on the 200 confirmation questions
#   report  the one comparison, jade + qwen-jade - vanilla (benchmarks/family_table.py)
# `choose` reads the two fold-B rows' metrics in $OUT, else as committed in full/ and
# reader-grpo/. Runs resume; each stage stashes into $STASH (`... run_confirm.sh stash` by hand).
#   bash docs/results/qwen-runs/crossfit/run_confirm.sh [choose eval report | stash]
# Change this file only by writing a new copy and renaming it over this one (mv).
set -euo pipefail
M=${MARAG:-.venv/bin/marag}
PY=${PYTHON:-.venv/bin/python}
CFG=configs/qwen/jade-train.yaml
CF=runs/data/splits-cf
OUT=${OUT:-runs/crossfit}
C=docs/results/qwen-runs/crossfit
D=$C/team-s200/adapters
GRPO=$C/reader-grpo/reader-grpo-a/policy
STASH=$C/confirm
stages=("$@"); [ ${#stages[@]} -eq 0 ] && stages=(choose eval report)
has() { local s; for s in "${stages[@]}"; do [ "$s" = "$1" ] && return 0; done; return 1; }
[ -f $CF/confirm.jsonl ] || $PY benchmarks/make_crossfit_splits.py --out $CF
mkdir -p $OUT
[ -d $STASH ] && $PY benchmarks/stash_runs.py restore $STASH $OUT
# the rule is applied once: a committed choice comes back, and a recomputed one must agree
[ -s $STASH/confirm-choice.txt ] && [ ! -s $OUT/confirm-choice.txt ] && cp $STASH/confirm-choice.txt $OUT/
stash() {
  $PY benchmarks/stash_runs.py save $OUT $STASH --include 'confirm-*'
  [ -s $OUT/confirm-choice.txt ] && cp $OUT/confirm-choice.txt $STASH/
  [ -s $OUT/report-confirm.md ] && cp $OUT/report-confirm.md $STASH/
  return 0
}
for s in "${stages[@]}"; do
  case $s in choose|eval|report|stash) ;; *) echo "unknown stage $s" >&2; exit 2 ;; esac
done
if has stash; then stash; exit 0; fi
if has choose; then  # the fold-B rows as run here, else as committed
  $PY - "$OUT" "$C" > $OUT/confirm-choice.new <<'PY'
import json, sys
from pathlib import Path
out, committed = Path(sys.argv[1]), Path(sys.argv[2])
f1 = {}
for key, row, stash in (("W", "warm-a-on-b", "full"), ("G", "reader-grpo-a-on-b", "reader-grpo")):
    m = out / row / "metrics.json"
    if not m.is_file():
        m = committed / stash / row / "metrics.json"
    if not m.is_file():
        sys.exit(f"{row}: no metrics.json here or committed; the rule needs the finished row")
    s = json.loads(m.read_text())
    if s["n"] != 790 or s["failed"]:
        sys.exit(f"{row}: {s['n']} questions, {s['failed']} failed; the rule needs all 790")
    f1[key] = s["f1"]
choice = "G" if f1["G"] > f1["W"] else "W"
print(choice)
print(f"W warm-a-on-b F1 {100 * f1['W']:.4f}; G reader-grpo-a-on-b F1 {100 * f1['G']:.4f}")
PY
  if [ -s $OUT/confirm-choice.txt ] && ! cmp -s $OUT/confirm-choice.new $OUT/confirm-choice.txt; then
    echo "the choice recomputed differs from the recorded one ($OUT/confirm-choice.txt)" >&2
    exit 2
  fi
  mv $OUT/confirm-choice.new $OUT/confirm-choice.txt
  cat $OUT/confirm-choice.txt
fi
choice=$(head -1 $OUT/confirm-choice.txt 2>/dev/null || true)
case $choice in
  W) adapters=(--adapter $D/sft) ;;
  G) adapters=(--adapter $D/sft --adapter $D/ppo --adapter $GRPO) ;;
  *) echo "no choice in $OUT/confirm-choice.txt: run the choose stage" >&2; exit 2 ;;
esac
if has eval; then
  $M eval --config $CFG --method jade "${adapters[@]}" --set llms.default.dtype=float32 \
      --dataset $CF/confirm.jsonl --out $OUT/confirm-qwen-jade --no-progress
  stash
  $M eval --config $CFG --method vanilla --set llms.default.dtype=float32 \
      --dataset $CF/confirm.jsonl --out $OUT/confirm-vanilla --no-progress
  stash
fi
if has report; then
  $PY benchmarks/family_table.py --out $OUT/report-confirm.md \
      --row jade "jade + qwen-jade ($choice)" $OUT/confirm-qwen-jade \
      --row vanilla "vanilla" $OUT/confirm-vanilla \
      --compare jade vanilla "jade + qwen-jade - vanilla (confirmation, n = 200)"
  cat $OUT/report-confirm.md
  stash
fi
