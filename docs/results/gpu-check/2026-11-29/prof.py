import json
import sys

import torch

sys.path.insert(0, "benchmarks")
import gpu_decode_speed as g

from marag.llm.hf_decode import BatchDecoder

res = []
for dtype in ("bfloat16", "float32"):
    model, tok = g.build(".devcarry/qwen-shape", "0.5b", None, "cuda", dtype)
    vocab = model.config.vocab_size
    for temp in (0.0, 1.0):
        dec = BatchDecoder(model, tok)
        with torch.inference_mode():
            g.decode(dec, g.rows(4, (200, 250), vocab, 8, 99, temp), 16)
            dec.stats.__init__()
            out, s = g.decode(dec, g.rows(16, (200, 900), vocab, 64, 0, temp), 16)
        st = dec.stats
        r = {"dtype": dtype, "T": temp, "s": round(s, 2), "steps": st.steps,
             "step_ms": round(1000 * st.step_s / st.steps, 2), "choose_ms": round(1000 * st.choose_s / st.steps, 2),
             "prefill_s": round(st.prefill_s, 2), "merge_s": round(st.merge_s, 2)}
        print(json.dumps(r), flush=True)
    if dtype == "bfloat16":
        from torch.profiler import ProfilerActivity, profile
        dec = BatchDecoder(model, tok)
        with torch.inference_mode():
            g.decode(dec, g.rows(4, (200, 250), vocab, 8, 99, 1.0), 16)
            with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as p:
                g.decode(dec, g.rows(16, (200, 900), vocab, 24, 0, 1.0), 16)
        print(p.key_averages().table(sort_by="self_cpu_time_total", row_limit=25), flush=True)
        print(p.key_averages().table(sort_by="self_cuda_time_total", row_limit=15), flush=True)
    del model
    torch.cuda.empty_cache()
