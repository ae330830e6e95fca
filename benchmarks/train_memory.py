"""Memory of the trainer's passes: the budget per model size (docs/training.md, "Memory"),
and one pass of a real model measured in this process.

  .venv/bin/python benchmarks/train_memory.py budget [--seq 1024 --response 128 --micro 2
      --score-micro 8 --rank 16 --chunk 512]
    prints the budget table for Qwen2.5 0.5B-14B (their config.json shapes, below): bf16
    weights, LoRA on the 7 projections (float32 adapter, gradient and Adam state),
    activations of one update micro-batch with and without gradient checkpointing, and the
    vocabulary logits of a scoring and an update micro-batch before and after chunking.

  .venv/bin/python benchmarks/train_memory.py measure --model DIR --pass score|update
      --scoring old|new [--checkpointing] [--rows 8 --prompt 256 --response 128]
    loads DIR in bf16 with a LoRA adapter (r 16 on the 7 projections), runs one pass under
    bf16 autocast as the learner does (score: no-grad token_stats with values; update:
    token_stats with entropy and values, a loss, backward), and prints JSON: the process's
    peak RSS during the pass (VmHWM, reset after loading through /proc/self/clear_refs)
    above its RSS before it, and the budget's estimate for the same shapes. ``--scoring
    old`` is the whole-vocabulary computation from before issue 40 (a float32 copy of the
    head, float32 logits for every position at once). Run each variant in a process of its
    own (the peak is the process's).

The estimates (bytes; H hidden, I intermediate, kv = key/value width, V vocabulary,
T tokens of a micro-batch, P its scored positions = rows x response):
  update activations, per token and layer, bf16 autocast and LoRA on every projection:
    24H + 4kv + 8I  (two float32 RMSNorm inputs 8H; bf16 inputs of the 6 adapted
    projections on H 12H and of down_proj 2I; q, k, v and the attention output 2H+4kv+2H;
    SwiGLU's gate, silu and up outputs 6I); with checkpointing 2H per token and layer (the
    layer inputs) plus one layer's full set during its recompute.
  scoring (no grad) decoder transient: about (10I + 12H) x T (one layer at a time: SwiGLU's
    pair and product, and the float32 copy of down_proj's input that the LoRA path makes).
  logits before (no restricted vocabulary): a scoring pass holds the float32 head copy
    (V x H x 4, when the head is stored in bf16) beside the P x V x 4 logits, then two
    logits-sized tensors at a time (tempered, log-softmax); an update keeps the head copy
    for the backward pass with about 6 logits-sized tensors (log-softmax, the entropy's
    terms, their gradients).
  logits after: chunks of c = min(chunk, P) positions, no head copy: c x V x 4 x 2 for a
    scoring pass (float32 logits, tempered in place, and the log-softmax; the bf16 product
    c x V x 2 is gone once upcast), c x V x 4 x 6 for an update (one chunk is live in the
    backward pass; with more than one chunk each is recomputed there, not kept).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from dataclasses import dataclass

GB = 1e9

@dataclass
class Shape:
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    inter: int
    vocab: int
    tied: bool

    @property
    def kv(self) -> int:
        return self.kv_heads * (self.hidden // self.heads)

    def params(self) -> int:
        h, kv, i = self.hidden, self.kv, self.inter
        layer = (h * h + h) + 2 * (h * kv + kv) + h * h + 3 * h * i + 2 * h
        return self.layers * layer + self.vocab * h * (1 if self.tied else 2) + h

    def lora_params(self, r: int) -> int:
        h, kv, i = self.hidden, self.kv, self.inter
        # q (h,h) k,v (h,kv) o (h,h) gate,up (h,i) down (i,h): r x (in + out) each
        return self.layers * r * (9 * h + 2 * kv + 3 * i)

    def act_per_token_layer(self) -> int:
        return 24 * self.hidden + 4 * self.kv + 8 * self.inter

    def activations(self, tokens: int, checkpointing: bool) -> float:
        full = self.act_per_token_layer() * tokens
        if not checkpointing:
            return full * self.layers
        return 2 * self.hidden * tokens * self.layers + full

    def score_transient(self, tokens: int) -> float:
        return (10 * self.inter + 12 * self.hidden) * tokens

    def logits_before(self, positions: int, update: bool) -> float:
        head_copy, one = self.vocab * self.hidden * 4, positions * self.vocab * 4
        if update:  # the head copy is kept for the backward pass, with 6 logits-sized tensors
            return head_copy + 6 * one
        # no grad: the head copy lives until the product is made; then two at a time
        return max(head_copy + one, 2 * one)

    def logits_after(self, positions: int, chunk: int, update: bool) -> float:
        c = min(chunk, positions)
        return c * self.vocab * 4 * (6 if update else 2)


# config.json of Qwen/Qwen2.5-{0.5B,1.5B,3B,7B,14B}(-Instruct): hidden_size,
# num_hidden_layers, num_attention_heads, num_key_value_heads, intermediate_size,
# vocab_size, tie_word_embeddings
QWEN25 = {
    "0.5B": Shape(896, 24, 14, 2, 4864, 151936, True),
    "1.5B": Shape(1536, 28, 12, 2, 8960, 151936, True),
    "3B": Shape(2048, 36, 16, 2, 11008, 151936, True),
    "7B": Shape(3584, 28, 28, 4, 18944, 152064, False),
    "14B": Shape(5120, 48, 40, 8, 13824, 152064, False),
}


def budget(args: argparse.Namespace) -> None:
    tokens = args.micro * args.seq
    score_tokens = args.score_micro * args.seq
    pos_u, pos_s = args.micro * args.response, args.score_micro * args.response
    print(f"sequence {args.seq} tokens (prompt + response), responses of {args.response} "
          f"tokens; update micro-batch {args.micro} rows ({tokens} tokens, {pos_u} scored "
          f"positions), scoring micro-batch {args.score_micro} rows ({score_tokens} tokens, "
          f"{pos_s} positions); LoRA r {args.rank}; chunk {args.chunk}; GB = 1e9 bytes\n")
    print("| model | H / layers / I / kv / V, tied | weights bf16 | LoRA params; +grad +Adam "
          "(fp32) | activations / update micro-batch: plain → checkpointed | logits, "
          "scoring pass: before → after | logits, update: before → after | scoring pass "
          "above weights: before → after | update peak, checkpointed, after |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name, s in QWEN25.items():
        w = s.params() * 2
        lora = s.lora_params(args.rank)
        act0, act1 = s.activations(tokens, False), s.activations(tokens, True)
        ls0, ls1 = s.logits_before(pos_s, False), s.logits_after(pos_s, args.chunk, False)
        lu0, lu1 = s.logits_before(pos_u, True), s.logits_after(pos_u, args.chunk, True)
        dec = s.score_transient(score_tokens)
        sc0, sc1 = max(dec, ls0), max(dec, ls1)
        peak = w + lora * 16 + act1 + lu1
        print(f"| {name} ({s.params() / 1e9:.2f}B) | {s.hidden} / {s.layers} / {s.inter} / "
              f"{s.kv} / {s.vocab}, {'yes' if s.tied else 'no'} | {w / GB:.2f} | "
              f"{lora / 1e6:.1f}M; {lora * 16 / GB:.2f} | {act0 / GB:.1f} → {act1 / GB:.2f} | "
              f"{ls0 / GB:.2f} → {ls1 / GB:.2f} | {lu0 / GB:.2f} → {lu1 / GB:.2f} | "
              f"{sc0 / GB:.2f} → {sc1 / GB:.2f} | {peak / GB:.1f} |")


def _rss_kb(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(field)


def measure(args: argparse.Namespace) -> None:
    import torch
    from transformers import AutoModelForCausalLM

    from marag.config import LoraConfig
    from marag.train.core import entropy as entropy_of
    from marag.train.experience import Transition, batch
    from marag.train.policy import (
        PolicyValue,
        Targets,
        attach_lora,
        enable_gradient_checkpointing,
        hidden_size,
        last_hidden,
        token_scores,
        token_stats,
    )

    torch.set_num_threads(args.threads)
    model = AutoModelForCausalLM.from_pretrained(args.model, dtype=torch.bfloat16)
    if args.checkpointing:
        enable_gradient_checkpointing(model)
    policy = PolicyValue(attach_lora(model, LoraConfig(r=args.rank)), hidden_size(model))
    g = torch.Generator().manual_seed(0)
    vocab = model.config.vocab_size
    items = [Transition(trace=i, group=0, order=0, role="AG",
                        prompt_ids=torch.randint(0, 150000, (args.prompt,), generator=g).tolist(),
                        response_ids=torch.randint(0, 150000, (args.response,),
                                                   generator=g).tolist(),
                        rollout_logprobs=[0.0] * args.response, temperature=0.8)
             for i in range(args.rows)]
    pad = model.config.pad_token_id or 0
    b = batch(items, pad)
    allowed = [None] * args.rows

    def old(module, b, allowed, entropy=False, with_values=True):
        lm = module.causal_lm()
        hidden = last_hidden(lm, b.input_ids, b.attention_mask, b.keep)
        head = lm.get_output_embeddings()
        with torch.autocast("cpu", enabled=False):
            logits = torch.nn.functional.linear(hidden.float(), head.weight.float())
            values = module.value_head(hidden.float()).squeeze(-1) if with_values else None
        logits = logits / b.temperature[:, None, None]
        logp_all = torch.log_softmax(logits, dim=-1)
        logp = logp_all.gather(-1, b.response_ids.unsqueeze(-1)).squeeze(-1)
        ent = entropy_of(logp_all) if entropy else None
        return logp, ent, values

    def new(module, b, allowed, entropy=False, with_values=True):
        return token_stats(module, b, allowed, entropy=entropy, with_values=with_values,
                           chunk=args.chunk)

    def none(module, b, allowed, entropy=False, with_values=True):
        """The decoder and the value head alone: what every variant shares."""
        hidden = last_hidden(module.causal_lm(), b.input_ids, b.attention_mask, b.keep)
        return module.value_head(hidden.float()).squeeze(-1)

    stats = {"old": old, "new": new, "none": none}[args.scoring]
    hidden = None
    if args.pass_ == "logits":  # the decoder's part runs before the measurement
        policy.eval()
        with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
            hidden = last_hidden(policy.causal_lm(), b.input_ids, b.attention_mask, b.keep)
        targets = Targets(ids=b.response_ids, pad=b.mask == 0, temperature=b.temperature,
                          allowed=allowed, chunk=args.chunk)
    rss0 = _rss_kb("VmRSS")
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # VmHWM := VmRSS
    t0 = time.perf_counter()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        if args.pass_ == "logits":
            with torch.no_grad():
                if args.scoring == "new":
                    token_scores(policy.causal_lm(), hidden, targets, args.chunk)
                else:  # the old code from its logits on
                    head = policy.causal_lm().get_output_embeddings()
                    with torch.autocast("cpu", enabled=False):
                        logits = torch.nn.functional.linear(hidden.float(), head.weight.float())
                    logits = logits / b.temperature[:, None, None]
                    logp_all = torch.log_softmax(logits, dim=-1)
                    logp_all.gather(-1, b.response_ids.unsqueeze(-1))
        elif args.pass_ == "score":
            policy.eval()
            with torch.no_grad():
                stats(policy, b, allowed, with_values=True)
        else:
            policy.train()
            logp, ent, values = stats(policy, b, allowed, entropy=True)
            m = b.mask
            loss = -(logp * m).mean() - 0.01 * (ent * m).mean() + (values * m).pow(2).mean()
    if args.pass_ == "update":
        loss.backward()
    seconds = time.perf_counter() - t0
    peak = _rss_kb("VmHWM")
    cfg = model.config
    s = Shape(hidden=cfg.hidden_size, layers=cfg.num_hidden_layers,
              heads=cfg.num_attention_heads, kv_heads=cfg.num_key_value_heads,
              inter=cfg.intermediate_size, vocab=vocab, tied=bool(cfg.tie_word_embeddings))
    tokens, positions = args.rows * (args.prompt + args.response), args.rows * args.response
    if args.pass_ in ("score", "logits"):
        logits = (s.logits_before(positions, False) if args.scoring == "old"
                  else s.logits_after(positions, args.chunk, False))
        estimate = logits if args.pass_ == "logits" else max(s.score_transient(tokens), logits)
    else:
        logits = (s.logits_before(positions, True) if args.scoring == "old"
                  else s.logits_after(positions, args.chunk, True))
        estimate = s.activations(tokens, args.checkpointing) + logits
    print(json.dumps({
        "model": os.path.basename(os.path.normpath(args.model)), "pass": args.pass_,
        "scoring": args.scoring, "checkpointing": args.checkpointing, "rows": args.rows,
        "prompt": args.prompt, "response": args.response, "tokens": tokens,
        "weights_gb": round(s.params() * 2 / GB, 3), "rss_before_gb": round(rss0 * 1024 / GB, 3),
        "peak_above_gb": round((peak - rss0) * 1024 / GB, 3),
        "estimate_gb": round(estimate / GB, 3), "seconds": round(seconds, 1),
        "threads": args.threads}))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    bp = sub.add_parser("budget")
    bp.add_argument("--seq", type=int, default=1024)
    bp.add_argument("--response", type=int, default=128)
    bp.add_argument("--micro", type=int, default=2)
    bp.add_argument("--score-micro", type=int, default=8)
    bp.add_argument("--rank", type=int, default=16)
    bp.add_argument("--chunk", type=int, default=512)
    mp = sub.add_parser("measure")
    mp.add_argument("--model", required=True)
    mp.add_argument("--pass", dest="pass_", choices=["score", "logits", "update"],
                    default="score")
    mp.add_argument("--scoring", choices=["old", "new", "none"], default="new")
    mp.add_argument("--checkpointing", action="store_true")
    mp.add_argument("--rows", type=int, default=8)
    mp.add_argument("--prompt", type=int, default=256)
    mp.add_argument("--response", type=int, default=128)
    mp.add_argument("--rank", type=int, default=16)
    mp.add_argument("--chunk", type=int, default=512)
    mp.add_argument("--threads", type=int, default=2)
    args = p.parse_args()
    budget(args) if args.cmd == "budget" else measure(args)


if __name__ == "__main__":
    main()
