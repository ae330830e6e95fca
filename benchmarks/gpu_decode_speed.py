"""Local-decoder throughput on one device: the growing cache against fixed slots, eager and
as a CUDA graph (marag.llm.hf_static), on the same rows.

A random-initialised model of a real shape (the config of SHAPE, e.g. marag's installed
Qwen2.5-Coder-0.5B; ``--size 7b`` widens it to Qwen2.5-7B's) decodes ``--rows`` seeded
sampled rows (``--temperature``, default 1; 0 is greedy) of random prompt tokens,
``--max-tokens`` each, ``--batch`` at a time, once per mode after a short warm-up of the same
mode (which also captures the graph). ``--shared-prefix N`` opens every row with the same N
tokens, and the ``prefix`` mode decodes with the shared-prefix cache on (those tokens computed
once; ``prefix_s`` is their share of the prefill time). A random
model almost never samples its end token, so every mode does the same work. Prints one JSON
line per mode: tokens/s, decode steps, mean step ms, prefill seconds, peak GiB (CUDA), and
how many rows chose exactly the tokens of the first mode.

    python benchmarks/gpu_decode_speed.py --shape .devcarry/qwen-shape --device cuda \
        --dtype bfloat16 --rows 32 --batch 16 --static 2048
    # on a CPU, to try it: --device cpu --dtype float32 --layers 2 --rows 4 --max-tokens 8
"""

from __future__ import annotations

import argparse
import json
import random
import time

QWEN_7B = {"hidden_size": 3584, "intermediate_size": 18944, "num_hidden_layers": 28,
           "num_attention_heads": 28, "num_key_value_heads": 4, "max_window_layers": 28,
           "vocab_size": 152064, "tie_word_embeddings": False}


def build(shape: str, size: str, layers: int | None, device: str, dtype: str):
    import torch
    import transformers

    cfg = transformers.AutoConfig.from_pretrained(shape)
    if size == "7b":
        for k, v in QWEN_7B.items():
            setattr(cfg, k, v)
    n = layers or cfg.num_hidden_layers
    cfg.num_hidden_layers = n
    if getattr(cfg, "layer_types", None):
        cfg.layer_types = [cfg.layer_types[0]] * n
    torch.manual_seed(0)
    with torch.device(device):
        model = transformers.AutoModelForCausalLM.from_config(cfg, dtype=getattr(torch, dtype))
    model.eval()
    tok = transformers.AutoTokenizer.from_pretrained(shape)
    return model, tok


def rows(n: int, lengths: tuple[int, int], vocab: int, max_tokens: int, seed: int = 0,
         temperature: float = 1.0, prefix: int = 0):
    """Seeded rows of random prompt tokens; the first ``prefix`` tokens are the same in every
    row (a shared instruction), marked as cacheable (``Row.prefix_len``)."""
    from marag.llm.base import SamplingParams
    from marag.llm.hf_decode import Row

    rng = random.Random(seed)
    shared = [rng.randrange(100, vocab - 1000) for _ in range(prefix)]
    out = []
    for i in range(n):
        ids = shared + [rng.randrange(100, vocab - 1000) for _ in range(rng.randint(*lengths))]
        out.append(Row(ids, SamplingParams(max_tokens=max_tokens, temperature=temperature,
                                           seed=i), tag=i, prefix_len=prefix))
    return out


def decode(decoder, batch: list, max_rows: int) -> tuple[dict[int, list[int]], float]:
    import torch

    out: dict[int, list[int]] = {}
    queue = list(batch)

    def admit(k: int) -> list:
        taken, queue[:] = queue[:k], queue[k:]
        return taken

    if torch.cuda.is_available():
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    decoder.run(admit, lambda r, res: out.__setitem__(r.tag, res.token_ids), max_rows=max_rows)
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    return out, time.perf_counter() - t0


def main() -> None:
    import torch

    from marag.llm.hf_decode import BatchDecoder

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--shape", required=True, help="folder with config.json and the tokenizer")
    p.add_argument("--size", choices=["0.5b", "7b"], default="0.5b")
    p.add_argument("--layers", type=int, default=None, help="fewer layers (a CPU try-out)")
    p.add_argument("--device", default="cuda")
    p.add_argument("--dtype", default="bfloat16")
    p.add_argument("--rows", type=int, default=32)
    p.add_argument("--batch", type=int, default=16, help="rows decoded together (max_rows)")
    p.add_argument("--prompt-min", type=int, default=200)
    p.add_argument("--prompt-max", type=int, default=900)
    p.add_argument("--max-tokens", type=int, default=128)
    p.add_argument("--static", type=int, default=2048, help="slot length for the fixed modes")
    p.add_argument("--modes", default="growing,static,graph",
                   help="of growing, static, graph, and prefix (the growing cache with the "
                        "shared-prefix cache on: the rows' first --shared-prefix tokens computed "
                        "once, later rows prefilled from it)")
    p.add_argument("--temperature", type=float, default=1.0, help="0: greedy")
    p.add_argument("--shared-prefix", type=int, default=0,
                   help="every row opens with the same this many tokens (a cacheable prefix)")
    a = p.parse_args()
    if a.shared_prefix < 0:
        p.error("--shared-prefix must be at least 0")
    if "prefix" in a.modes.split(",") and not a.shared_prefix:
        p.error("the prefix mode needs --shared-prefix N")
    model, tok = build(a.shape, a.size, a.layers, a.device, a.dtype)
    vocab = model.config.vocab_size
    print(json.dumps({"model": f"random {a.size} shape", "layers": model.config.num_hidden_layers,
                      "parameters_m": round(sum(x.numel() for x in model.parameters()) / 1e6),
                      "device": str(model.device), "dtype": a.dtype, "torch": torch.__version__,
                      "gpu": torch.cuda.get_device_name() if torch.cuda.is_available() else None}),
          flush=True)
    first: dict[int, list[int]] | None = None
    for mode in a.modes.split(","):
        static = 0 if mode in ("growing", "prefix") else a.static
        dec = BatchDecoder(model, tok, static_len=static, cuda_graphs=mode == "graph",
                           prefix_cache=mode == "prefix")
        with torch.inference_mode():  # warm-up (and the graph's capture; another prefix)
            decode(dec, rows(min(4, a.rows), (a.prompt_min, a.prompt_min + 50), vocab, 8, 99,
                             a.temperature, a.shared_prefix), a.batch)
        if torch.cuda.is_available():
            torch.cuda.reset_peak_memory_stats()
        dec.stats.__init__()
        out, seconds = decode(dec, rows(a.rows, (a.prompt_min, a.prompt_max), vocab,
                                        a.max_tokens, 0, a.temperature, a.shared_prefix),
                              a.batch)
        first = first if first is not None else out
        st = dec.stats
        tokens = sum(len(t) for t in out.values())
        print(json.dumps({
            "mode": mode, "rows": len(out), "tokens": tokens, "seconds": round(seconds, 2),
            "tokens_per_s": round(tokens / seconds, 1), "steps": st.steps,
            "mean_batch": round(st.step_rows / max(st.steps, 1), 1),
            "step_ms": round(1000 * st.step_s / max(st.steps, 1), 2),
            "choose_ms": round(1000 * st.choose_s / max(st.steps, 1), 2),
            "prefill_s": round(st.prefill_s, 2),
            "prefill_tokens": st.prefill_tokens, "prefix_tokens": st.prefix_tokens,
            "prefix_s": round(st.prefix_s, 2),
            "graph_captures": getattr(dec.slot_step, "captures", 0),
            "graph_error": getattr(dec.slot_step, "graph_error", None),
            "peak_gib": round(torch.cuda.max_memory_allocated() / 2**30, 2)
            if torch.cuda.is_available() else None,
            "rows_same_tokens_as_first_mode": sum(out[i] == first.get(i) for i in out)}),
            flush=True)
        del dec
        if torch.cuda.is_available():
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
