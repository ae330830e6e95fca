#!/bin/bash
# IRCoT's direct reader after the decoder's KV cache began appending in place (RoomyLayer,
# marag.llm.kv_layer), on the same 30 questions as run-2026-11-29.sh: run-2026-11-29-direct.sh's
# command at this commit, its output in runs/fm39/direct-roomy, the cross-fitting evaluation
# paused (SIGSTOP) for the duration. From the repo root; dtype auto (float32 on a CPU without
# native bfloat16).
NAME=direct-roomy exec bash "$(dirname "$0")/run-2026-11-29-direct.sh"
