# fresh process per arm: the first decode of a bf16 growing cache on CUDA, cuDNN attention off (the fix) or on
import contextlib
import json
import sys

import torch

sys.path.insert(0, "benchmarks")
import gpu_decode_speed as g

import marag.llm.hf_decode as hd

arm = sys.argv[1]
if arm == "cudnn":  # as run (f62eb96) the switch was hf_decode.attention_backends; now:
    hd.without_cudnn_attention = lambda device: contextlib.nullcontext()
model, tok = g.build(".devcarry/qwen-shape", "0.5b", None, "cuda", "bfloat16")
vocab = model.config.vocab_size
for k in range(2):
    dec = hd.BatchDecoder(model, tok)
    with torch.inference_mode():
        g.decode(dec, g.rows(4, (200, 250), vocab, 8, 99, 0.0), 16)
        dec.stats.__init__()
        out, s = g.decode(dec, g.rows(32, (200, 900), vocab, 128, 0, 0.0), 16)
    st = dec.stats
    print(json.dumps({"arm": arm, "pass": k + 1, "s": round(s, 2), "steps": st.steps,
                      "tokens_per_s": round(sum(len(t) for t in out.values()) / s, 1),
                      "step_ms": round(1000 * st.step_s / st.steps, 2),
                      "prefill_s": round(st.prefill_s, 2),
                      "peak_gib": round(torch.cuda.max_memory_allocated() / 2**30, 2)}), flush=True)
    with open(f"{sys.argv[2]}/ab-{arm}-tokens-{k+1}.json", "w") as f:
        json.dump(out, f)
