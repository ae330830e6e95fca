"""Generation throughput of the ``hf`` backend on the embedded SmolLM2, and load times.

For each concurrency level c, ``--requests`` one-conversation ``generate`` calls are made with
at most c in flight (as the evaluator's semaphore does); c=1 is plain sequential calls.
Prompts are one-shot answer prompts built from the shared HotpotQA questions. Reports
generated tokens/s, requests/s and how many decode batches the backend ran. Also: first load
of the embedded model (GGUF conversion into a fresh cache) and cached load, and llama.cpp
(sequential, it serialises calls) when llama-cpp-python is installed.

    .venv/bin/python benchmarks/llm_throughput.py [--threads 1] [--bf16] [--requests 16] [--repeat 3]
        [--max-tokens 32] [--levels 1,4,8,16] [--first-load] [--llamacpp] [--steps-only]
        [--no-prefix-cache] [--linear] [--compare-generate]

"reused" is the share of all prompt tokens whose KV came from the backend's shared-prefix
cache (the system line + worked example every prompt starts with) instead of a prefill.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from pathlib import Path

from marag.llm.base import LLM, LLMError, Messages, SamplingParams

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "hotpotqa.questions.jsonl"


def conversations(n: int) -> list[Messages]:
    questions = []
    with open(DATA, encoding="utf-8") as f:
        for line in f:
            questions.append(json.loads(line)["question"])
            if len(questions) == n:
                break
    return [[{"role": "user", "content": "What is the capital of Germany?"},
             {"role": "assistant", "content": "<answer>Berlin</answer>"},
             {"role": "user", "content": q}] for q in questions]


async def run_level(llm: LLM, convs: list[Messages], params: SamplingParams,
                    concurrency: int) -> tuple[float, int]:
    sem = asyncio.Semaphore(concurrency)

    async def one(i: int, conv: Messages) -> int:
        async with sem:
            [c] = await llm.generate([conv], params.replace(seed=i))
            return c.completion_tokens

    t0 = time.perf_counter()
    tokens = await asyncio.gather(*(one(i, c) for i, c in enumerate(convs)))
    return time.perf_counter() - t0, sum(tokens)


def step_costs(model: object, tok: object, batch_sizes: list[int], prompt: int = 64,
               steps: int = 8, bf16: bool = False) -> list[tuple[int, float, float]]:
    """Forward costs of marag's decoder: one prefill of ``rows`` x ``prompt`` tokens, then
    decode steps (the same ``_forward`` the backend runs, output projection included)."""
    import torch
    from transformers import DynamicCache

    from marag.llm.hf_decode import BatchDecoder

    decoder = BatchDecoder(model, tok, bf16_autocast=bf16)
    out = []
    for rows in batch_sizes:
        ids = torch.randint(100, 1000, (rows, prompt))
        mask = torch.ones_like(ids)
        with torch.inference_mode():
            cache = DynamicCache(config=model.config)
            t0 = time.perf_counter()
            decoder._forward(ids, mask, torch.arange(prompt).expand(rows, -1), cache)
            prefill = time.perf_counter() - t0
            nxt = ids[:, -1:]
            t0 = time.perf_counter()
            for i in range(steps):
                mask = torch.cat([mask, torch.ones((rows, 1), dtype=mask.dtype)], dim=1)
                decoder._forward(nxt, mask, torch.full((rows, 1), prompt + i), cache)
            out.append((rows, prefill, (time.perf_counter() - t0) / steps))
    return out


def linear_costs(model: object, batch_sizes: list[int], steps: int = 30) -> None:
    """Median decode-step and prefill ms with transformers' ``nn.Linear`` against marag's
    ``FastLinear``.

    Steps alternate between the two on one growing KV cache, so both see the same cache
    lengths and the same box load.
    """
    import torch
    from torch import nn
    from transformers import DynamicCache

    from marag.llm.cpu_linear import FastLinear, use_fast_linears

    use_fast_linears(model)
    linears = [m for m in model.modules() if type(m) is FastLinear]

    def set_class(cls: type) -> None:
        for m in linears:
            m.__class__ = cls

    print("| rows | nn.Linear step ms | FastLinear step ms |")
    print("|---|---|---|")
    for rows in batch_sizes:
        prompt = 80
        ids = torch.randint(100, 1000, (rows, prompt))
        mask = torch.ones_like(ids)
        times: dict[type, list[float]] = {nn.Linear: [], FastLinear: []}
        with torch.inference_mode():
            cache = DynamicCache(config=model.config)
            model(input_ids=ids, attention_mask=mask, past_key_values=cache, use_cache=True,
                  logits_to_keep=1)
            for i in range(2 * steps):
                cls = FastLinear if i % 2 else nn.Linear
                set_class(cls)
                mask = torch.cat([mask, torch.ones((rows, 1), dtype=mask.dtype)], dim=1)
                t0 = time.perf_counter()
                model(input_ids=ids[:, -1:], attention_mask=mask,
                      position_ids=torch.full((rows, 1), prompt + i), past_key_values=cache,
                      use_cache=True, logits_to_keep=1)
                times[cls].append(time.perf_counter() - t0)
        plain, fast = (sorted(t)[len(t) // 2] * 1000 for t in times.values())
        print(f"| {rows} | {plain:.0f} | {fast:.0f} |", flush=True)

    # prefills (fresh cache each time): a joining row's suffix up to a batch of prompts
    print("| prefill rows x tokens | nn.Linear ms | FastLinear ms |")
    print("|---|---|---|")
    for rows, tokens in [(1, 32), (4, 32), (7, 40), (8, 80)]:
        ids = torch.randint(100, 1000, (rows, tokens))
        times = {nn.Linear: [], FastLinear: []}
        with torch.inference_mode():
            for i in range(8):
                cls = FastLinear if i % 2 else nn.Linear
                set_class(cls)
                t0 = time.perf_counter()
                model(input_ids=ids, attention_mask=torch.ones_like(ids),
                      past_key_values=DynamicCache(config=model.config), use_cache=True,
                      logits_to_keep=1)
                times[cls].append(time.perf_counter() - t0)
        plain, fast = (sorted(t)[len(t) // 2] * 1000 for t in times.values())
        print(f"| {rows} x {tokens} | {plain:.0f} | {fast:.0f} |", flush=True)
    set_class(FastLinear)


def compare_generate(model: object, tok: object, convs: list[Messages], max_tokens: int) -> None:
    """Greedy, all conversations in one call: transformers' ``generate`` vs marag's loop."""
    import torch

    from marag.llm.hf_local import HFBackend

    backend = HFBackend("smollm2", model=model, tokenizer=tok, max_batch_size=len(convs))
    texts = [tok.apply_chat_template(c, add_generation_prompt=True, tokenize=False) for c in convs]
    tok.padding_side = "left"
    enc = tok(texts, add_special_tokens=False, return_tensors="pt", padding=True)
    t0 = time.perf_counter()
    with torch.inference_mode():
        out = model.generate(**enc, max_new_tokens=max_tokens, do_sample=False)
    hf_s = time.perf_counter() - t0
    hf_tokens = int((out[:, enc.input_ids.shape[1]:] != tok.pad_token_id).sum())
    t0 = time.perf_counter()
    mine = asyncio.run(backend.generate(convs, SamplingParams(max_tokens=max_tokens)))
    our_s = time.perf_counter() - t0
    our_tokens = sum(c.completion_tokens for c in mine)
    print(f"| model.generate, {len(convs)} rows, greedy | {hf_s:.1f} s | {hf_tokens} tokens |")
    print(f"| marag decode loop, same rows | {our_s:.1f} s | {our_tokens} tokens |")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    ap.add_argument("--bf16", action="store_true", help="bf16 autocast")
    ap.add_argument("--requests", type=int, default=16)
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--temperature", type=float, default=0.7)
    ap.add_argument("--levels", default="1,4,8,16")
    ap.add_argument("--repeat", type=int, default=1,
                    help="rounds over all levels (speed-ups are per round)")
    ap.add_argument("--first-load", action="store_true", help="also time a cold GGUF conversion")
    ap.add_argument("--llamacpp", action="store_true", help="also time llama.cpp if installed")
    ap.add_argument("--compare-generate", action="store_true",
                    help="also time transformers' generate on one batch of --levels' largest")
    ap.add_argument("--no-prefix-cache", action="store_true",
                    help="switch off the hf backend's shared-prefix KV cache")
    ap.add_argument("--linear", action="store_true",
                    help="also time decode steps with nn.Linear against marag's FastLinear")
    ap.add_argument("--steps-only", action="store_true",
                    help="only the raw prefill/decode-step costs (and llama.cpp if asked)")
    args = ap.parse_args()

    import torch

    from marag.llm.embedded import resolve_model
    from marag.llm.hf_local import HFBackend

    if args.threads:
        torch.set_num_threads(args.threads)
    print(f"torch threads: {torch.get_num_threads()}, bf16 autocast: {args.bf16}, "
          f"prefix cache: {not args.no_prefix_cache}")
    if args.first_load:
        with tempfile.TemporaryDirectory() as tmp:
            t0 = time.perf_counter()
            resolve_model("smollm2", cache_dir=tmp)
            print(f"first load (GGUF -> safetensors cache): {time.perf_counter() - t0:.1f} s")
    t0 = time.perf_counter()
    model, tok = resolve_model("smollm2")
    print(f"cached load: {time.perf_counter() - t0:.1f} s")

    convs = conversations(args.requests)
    params = SamplingParams(temperature=args.temperature, max_tokens=args.max_tokens)
    levels = [int(x) for x in args.levels.split(",")]
    prompt_tokens = [len(HFBackend("smollm2", model=model, tokenizer=tok).encode(c)) for c in convs]
    walls: dict[int, list[float]] = {c: [] for c in levels}
    print("| round | in flight | wall s | gen tokens | tokens/s | requests/s | batches | reused | "
          "speed-up |")
    print("|---|---|---|---|---|---|---|---|---|")
    # rounds go through every level in turn, so a slow spell of the box hits all levels alike
    for rnd in range(0 if args.steps_only else args.repeat):
        for c in levels:
            llm = HFBackend("smollm2", model=model, tokenizer=tok, max_batch_size=max(levels),
                            bf16_autocast=args.bf16, prefix_cache=not args.no_prefix_cache)
            wall, tokens = asyncio.run(run_level(llm, convs, params, c))
            walls[c].append(wall)
            pc = llm._decoder.prefix_cache
            reused = pc.reused_tokens / sum(prompt_tokens) if pc is not None else 0.0
            print(f"| {rnd + 1} | {c} | {wall:.1f} | {tokens} | {tokens / wall:.1f} | "
                  f"{len(convs) / wall:.2f} | {llm.batches_run} | {reused:.0%} | "
                  f"{walls[levels[0]][rnd] / wall:.2f}x |", flush=True)
    if args.repeat > 1 and not args.steps_only:
        print(f"speed-up over {levels[0]} in flight, per round (min / median / max):")
        for c in levels[1:]:
            ups = sorted(a / b for a, b in zip(walls[levels[0]], walls[c], strict=True))
            print(f"  {c} in flight: {ups[0]:.2f}x / {ups[len(ups) // 2]:.2f}x / {ups[-1]:.2f}x")

    print(f"prompt tokens per request: mean {sum(prompt_tokens) / len(convs):.0f}, "
          f"total {sum(prompt_tokens)}")
    print("| rows | prefill s (64-token prompts) | decode step ms | decode tokens/s |")
    print("|---|---|---|---|")
    for rows, prefill, step in step_costs(model, tok, levels, bf16=args.bf16):
        print(f"| {rows} | {prefill:.2f} | {step * 1000:.0f} | {rows / step:.1f} |", flush=True)

    if args.linear:
        linear_costs(model, sorted({1, 2, 3, 4, 6, *levels}))

    if args.compare_generate:
        compare_generate(model, tok, convs[: max(levels)], args.max_tokens)

    if args.llamacpp:
        try:
            from marag.llm.llamacpp import LlamaCppBackend

            t0 = time.perf_counter()
            lc = LlamaCppBackend("smollm2", n_threads=args.threads)
            print(f"llama.cpp load: {time.perf_counter() - t0:.1f} s")
        except LLMError as e:  # report and go on: llama.cpp is optional
            print(f"llama.cpp not available: {e}")
            return
        wall, tokens = asyncio.run(run_level(lc, convs, params, 1))
        seq = sorted(walls[1]) if walls.get(1) else []
        rel = f"{seq[len(seq) // 2] / wall:.2f}x of hf sequential" if seq else "-"
        print(f"| llama.cpp sequential | {wall:.1f} | {tokens} | {tokens / wall:.1f} | "
              f"{len(convs) / wall:.2f} | - | {rel} |")


if __name__ == "__main__":
    main()
