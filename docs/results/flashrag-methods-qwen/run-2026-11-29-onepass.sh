#!/bin/bash
# IRCoT's direct reader after a prompt whose prefix is computed began prefilling in one pass
# (hf_decode's _prefill_whole), on the same 30 questions as run-2026-11-29.sh:
# run-2026-11-29-direct.sh's command at this commit, its output in runs/fm39/direct-onepass,
# the cross-fitting evaluation paused (SIGSTOP) for the duration. From the repo root; dtype
# auto (float32 on a CPU without native bfloat16).
NAME=direct-onepass exec bash "$(dirname "$0")/run-2026-11-29-direct.sh"
