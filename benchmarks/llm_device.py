"""The ``hf`` backend on an accelerator: a correctness check against CPU, then throughput.

1. Check: the tiny model built in code runs on CPU and on ``--device``; greedy outputs
   must be identical and logprobs agree to 1e-3, for a batch, with the shared-prefix cache,
   and for requests that join a running batch.
2. Throughput: a model with the architecture of ``--model-dir`` (its ``config.json`` and
   tokenizer; weights are random unless the folder has them, because the accelerator host
   cannot reach the hub and the embedded weights are too large to carry) generates
   ``--max-tokens`` for ``--requests`` conversations at each concurrency level, as in
   ``llm_throughput.py``. Random weights rarely emit EOS, so every request generates about
   ``--max-tokens`` tokens; tokens/s are what matters.

    python benchmarks/llm_device.py --device cuda --model-dir DIR [--dtype bfloat16]
        [--levels 1,8,32,64] [--requests 64] [--max-tokens 64]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

from llm_throughput import run_level  # this folder is on sys.path when run as a script

from marag.llm.base import Messages, SamplingParams

TOPICS = ["the tallest mountain in Europe", "the author of a famous Russian novel",
          "the river that flows through Vienna", "the inventor of the telephone",
          "the capital city of Australia", "the largest moon of Saturn",
          "the composer of the Brandenburg concertos", "the year the Berlin Wall fell"]


def conversations(n: int) -> list[Messages]:
    return [[{"role": "system", "content": "Answer in a few words inside <answer></answer>."},
             {"role": "user", "content": f"Question {i}: tell me about {TOPICS[i % len(TOPICS)]}."}]
            for i in range(n)]


def check(device: str) -> bool:
    """Tiny model: the device's outputs equal the CPU's. Prints one line per case."""
    import copy

    from marag.llm.hf_local import HFBackend
    from marag.llm.tiny import build_tiny_model

    cpu_model, tok = build_tiny_model(seed=0)
    dev_model = copy.deepcopy(cpu_model).to(device)
    convs = conversations(6)
    greedy = SamplingParams(max_tokens=12, logprobs=True)

    async def both(batch_wait_ms: float, staggered: bool) -> tuple[list, list]:
        out = []
        for model, dev in ((cpu_model, "cpu"), (dev_model, device)):
            llm = HFBackend("tiny", model=model, tokenizer=tok, device=dev,
                            batch_wait_ms=batch_wait_ms)
            if staggered:  # later requests join a batch that is already decoding
                async def late(i: int, conv: Messages, llm: HFBackend = llm) -> object:
                    await asyncio.sleep(0.01 * i)
                    [c] = await llm.generate([conv], greedy)
                    return c
                out.append(await asyncio.gather(*(late(i, c) for i, c in enumerate(convs))))
            else:
                out.append(await llm.generate(convs, greedy))
            await llm.aclose()
        return out[0], out[1]

    ok = True
    for name, wait, staggered in (("one batch", 5.0, False), ("joining a running batch", 0.0,
                                                                 True)):
        cpu, dev = asyncio.run(both(wait, staggered))
        same = all(a.token_ids == b.token_ids for a, b in zip(cpu, dev, strict=True))
        worst = max(abs(x - y) for a, b in zip(cpu, dev, strict=True)
                    for x, y in zip(a.logprobs, b.logprobs, strict=False))
        good = same and worst < 1e-3
        ok &= good
        print(f"check {name}: tokens {'equal' if same else 'DIFFER'}, "
              f"max |logprob diff| {worst:.2e} -> {'PASS' if good else 'FAIL'}", flush=True)
    async def sampled(together: bool) -> list:
        llm = HFBackend("tiny", model=dev_model, tokenizer=tok, device=device,
                        batch_wait_ms=20.0)
        params = SamplingParams(temperature=1.0, max_tokens=12)
        calls = [llm.generate([c], params.replace(seed=i)) for i, c in enumerate(convs)]
        out = await asyncio.gather(*calls) if together else [await c for c in calls]
        await llm.aclose()
        return [c.token_ids for [c] in out]

    alone, batched = asyncio.run(sampled(False)), asyncio.run(sampled(True))
    good = alone == batched
    ok &= good
    print(f"check seeded sampling on {device}, alone vs batched: "
          f"{'equal' if good else 'DIFFER'} -> {'PASS' if good else 'FAIL'}", flush=True)
    return ok


def step_costs(model: object, tok: object, rows_list: list[int], prompt: int = 64,
               steps: int = 20) -> None:
    """Where a decode step's time goes: transformers' forward alone, marag's ``_forward``
    (the same plus masks, position ids and the copy of logits to the host) and ``_choose``."""
    import torch
    from transformers import DynamicCache

    from marag.llm.base import SamplingParams
    from marag.llm.hf_decode import BatchDecoder, Row, _choose

    decoder = BatchDecoder(model, tok)
    device = model.device
    print("| rows | model forward ms | marag _forward ms | _choose ms (T=1) |")
    print("|---|---|---|---|")
    for rows in rows_list:
        ids = torch.randint(100, 1000, (rows, prompt))
        mask = torch.ones_like(ids)
        with torch.inference_mode():
            cache = DynamicCache(config=model.config)
            decoder._forward(ids, mask, torch.arange(prompt).expand(rows, -1), cache)
            nxt = ids[:, -1:].to(device)
            t0 = time.perf_counter()
            for _ in range(steps):
                model(input_ids=nxt, past_key_values=cache, use_cache=True, logits_to_keep=1)
            if device.type == "cuda":
                torch.cuda.synchronize()
            raw = (time.perf_counter() - t0) / steps
            cache = DynamicCache(config=model.config)
            decoder._forward(ids, mask, torch.arange(prompt).expand(rows, -1), cache)
            t0 = time.perf_counter()
            for i in range(steps):
                mask = torch.cat([mask, torch.ones((rows, 1), dtype=mask.dtype)], dim=1)
                logits = decoder._forward(ids[:, -1:], mask, torch.full((rows, 1), prompt + i),
                                          cache)
            ours = (time.perf_counter() - t0) / steps
            sampled = [Row([1], SamplingParams(temperature=1.0, max_tokens=8),
                           generator=torch.Generator(device).manual_seed(i))
                       for i in range(rows)]
            t0 = time.perf_counter()
            for _ in range(steps):
                _choose(sampled, logits.clone())
            choose = (time.perf_counter() - t0) / steps
        print(f"| {rows} | {raw * 1000:.1f} | {ours * 1000:.1f} | {choose * 1000:.1f} |",
              flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--model-dir", required=True, help="config.json + tokenizer files")
    ap.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"])
    ap.add_argument("--levels", default="1,8,32,64")
    ap.add_argument("--requests", type=int, default=64)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--skip-check", action="store_true")
    ap.add_argument("--steps", action="store_true", help="also time the parts of a decode step")
    args = ap.parse_args()

    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    from marag.llm.hf_local import HFBackend

    print(f"torch {torch.__version__}, device {args.device}: "
          f"{torch.cuda.get_device_name() if args.device.startswith('cuda') else args.device}")
    if not args.skip_check and not check(args.device):
        sys.exit(1)

    folder = Path(args.model_dir)
    tok = AutoTokenizer.from_pretrained(folder)
    dtype = getattr(torch, args.dtype)
    if any(folder.glob("*.safetensors")):
        model = AutoModelForCausalLM.from_pretrained(folder, dtype=dtype)
        weights = "trained"
    else:
        torch.manual_seed(0)
        model = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(folder), dtype=dtype)
        weights = "random"
    model = model.to(args.device).eval()
    print(f"model: {type(model).__name__}, {sum(p.numel() for p in model.parameters()) / 1e6:.0f}M "
          f"params, {args.dtype}, {weights} weights")
    levels = [int(x) for x in args.levels.split(",")]
    if args.steps:
        step_costs(model, tok, levels)
    convs = conversations(args.requests)
    params = SamplingParams(temperature=1.0, max_tokens=args.max_tokens)
    print("| in flight | wall s | gen tokens | tokens/s | speed-up |")
    print("|---|---|---|---|---|")
    base = None
    for c in levels:
        llm = HFBackend("model", model=model, tokenizer=tok, device=args.device,
                        max_batch_size=max(levels))
        asyncio.run(run_level(llm, convs[:2], params, 2))  # warm-up: kernels, allocator
        wall, tokens = asyncio.run(run_level(llm, convs, params, c))
        tps = tokens / wall
        base = base or tps
        print(f"| {c} | {wall:.1f} | {tokens} | {tps:.0f} | {tps / base:.2f}x |", flush=True)


if __name__ == "__main__":
    main()
