"""What one decoding step costs on the hf backend's model, by batch rows and cached columns.

Loads an installed model in float32 with marag's ``FastLinear`` (as ``hf_decode`` does), fills
a cache with random keys and values of WIDTH columns for ROWS rows, and times single-token
forward passes (the step of ``BatchDecoder``: one new token a row, the cache growing by one
column each step). ``--layers`` picks the cache's layers: transformers' ``DynamicLayer`` (one
``torch.cat`` of the whole cache a step) or ``RoomyLayer`` (``marag.llm.kv_layer``: appends in
place; the decoder's). With ``--profile ROWS:WIDTH`` it also prints torch's operator table for
one such step (where the time goes: matrix products, attention, the cache's concatenation).
``--matmul-rows N`` first times plain matrix products of N rows through the model's weight
shapes (GFLOP/s: how close a prefill's products come to the CPU's peak).

    .venv/bin/python benchmarks/decode_step.py --model ~/.cache/marag/models/qwen2.5-coder-0.5b \\
        --shapes 1:1500 8:1500 8:2500 16:1500 --layers dynamic roomy --steps 9 --profile 8:1500
"""

from __future__ import annotations

import argparse
import time


def _cache(model, rows: int, width: int, layer: str):  # type: ignore[no-untyped-def]
    import torch
    from transformers import DynamicCache

    from marag.llm.kv_layer import roomy_cache

    cfg = model.config
    heads = cfg.num_key_value_heads
    dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
    cache = roomy_cache(cfg) if layer == "roomy" else DynamicCache(config=cfg)
    for index in range(cfg.num_hidden_layers):
        cache.update(torch.randn(rows, heads, width, dim), torch.randn(rows, heads, width, dim),
                     index)
    return cache


def _step(model, cache, rows: int, width: int, k: int) -> None:  # type: ignore[no-untyped-def]
    import torch

    mask = torch.ones(rows, width + k + 1, dtype=torch.long)
    model(input_ids=torch.randint(0, 1000, (rows, 1)), attention_mask=mask,
          position_ids=torch.full((rows, 1), width + k), past_key_values=cache, use_cache=True,
          logits_to_keep=1)


def _matmul_rates(model, rows: int, reps: int = 5) -> None:  # type: ignore[no-untyped-def]
    """GFLOP/s of a plain ``F.linear`` of ``rows`` rows through each distinct weight shape of
    the model's linear layers (a prefill's matrix products), and of a 2048 square ``mm``."""
    import torch
    import torch.nn.functional as F

    shapes = sorted({tuple(m.weight.shape) for m in model.modules()
                     if isinstance(getattr(m, "weight", None), torch.Tensor)
                     and m.weight.dim() == 2 and "Embedding" not in type(m).__name__})
    cases = [(rows, in_f, out_f) for out_f, in_f in shapes] + [(2048, 2048, 2048)]
    for n, in_f, out_f in cases:
        x, w = torch.randn(n, in_f), torch.randn(out_f, in_f)
        F.linear(x, w)
        t0 = time.perf_counter()
        for _ in range(reps):
            F.linear(x, w)
        seconds = (time.perf_counter() - t0) / reps
        print(f"linear [{n} x {in_f}] -> {out_f}: "
              f"{2 * n * in_f * out_f / seconds / 1e9:.1f} GFLOP/s")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True, help="an installed model folder")
    ap.add_argument("--shapes", nargs="+", default=["1:1500", "8:1500", "16:1500"],
                    help="ROWS:WIDTH pairs")
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--profile", default=None, help="ROWS:WIDTH of one profiled step")
    ap.add_argument("--layers", nargs="+", choices=["dynamic", "roomy"], default=["roomy"],
                    help="cache layers: transformers' DynamicLayer (a torch.cat a step) or "
                         "marag's RoomyLayer (in-place appends, what the decoder uses); "
                         "several are timed shape by shape, alternating")
    ap.add_argument("--matmul-rows", type=int, default=0,
                    help="also time plain matrix products of this many rows through the "
                         "model's weight shapes (GFLOP/s; 0: off)")
    args = ap.parse_args()
    if args.steps < 2:
        ap.error("--steps must be at least 2 (the first step warms up and is not counted)")

    import torch
    from transformers import AutoModelForCausalLM

    from marag.llm.cpu_linear import use_fast_linears

    model = AutoModelForCausalLM.from_pretrained(args.model, dtype=torch.float32).eval()
    use_fast_linears(model)
    print(f"threads {torch.get_num_threads()}; seconds per step, {args.steps} steps (the first "
          "warms up)")
    with torch.inference_mode():
        if args.matmul_rows:
            _matmul_rates(model, args.matmul_rows)
        for shape in args.shapes:
            rows, width = (int(x) for x in shape.split(":"))
            for layer in args.layers:
                cache = _cache(model, rows, width, layer)
                times = []
                for k in range(args.steps):
                    t0 = time.perf_counter()
                    _step(model, cache, rows, width, k)
                    times.append(time.perf_counter() - t0)
                steady = sorted(times[1:])[len(times[1:]) // 2]
                print(f"{layer:7s} rows {rows:3d} width {width:5d}: median after the first "
                      f"{steady:.3f}  (" + " ".join(f"{t:.3f}" for t in times) + ")")
        if args.profile:
            from torch.profiler import ProfilerActivity, profile

            rows, width = (int(x) for x in args.profile.split(":"))
            for layer in args.layers:
                cache = _cache(model, rows, width, layer)
                for k in range(2):  # the first step moves a RoomyLayer into a roomy buffer
                    _step(model, cache, rows, width, k)
                with profile(activities=[ProfilerActivity.CPU]) as prof:
                    _step(model, cache, rows, width, 2)
                print(f"{layer}, one step of {rows} rows at {width} columns:")
                print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=8))


if __name__ == "__main__":
    main()
