#!/bin/bash
# IRCoT's direct reader with whole step prompts kept in the prefix cache (Role.cache_prompt)
# and each step's decoding stopped once its first sentence is settled (stop_when), on the same
# 30 questions as run-2026-11-29.sh: run-2026-11-29-direct.sh's command at this commit, its
# output in runs/fm39/direct-fast, the cross-fitting evaluation paused (SIGSTOP) for the
# duration. From the repo root; dtype auto (float32 on a CPU without native bfloat16).
NAME=direct-fast exec bash "$(dirname "$0")/run-2026-11-29-direct.sh"
