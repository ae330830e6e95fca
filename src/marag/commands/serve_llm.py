"""``marag serve-llm``: serve a local model over an OpenAI-compatible HTTP API."""

from __future__ import annotations

import argparse
import sys


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "serve-llm",
        help="serve a local model as an OpenAI-compatible server (POST /v1/chat/completions)",
        description=(
            "Serve a local transformers model (an embedded name such as smollm2, a model folder, "
            "a .gguf file or a hub id) with POST /v1/chat/completions, POST /v1/completions "
            "(both also streamed), GET /v1/models and GET /v1/models/{id}. Concurrent requests "
            "are batched together; a request whose client disconnects stops generating. "
            "Binds 127.0.0.1 unless told otherwise."
        ),
    )
    p.add_argument("--model", default="smollm2",
                   help="smollm2, gemma3-270m, a model folder, a .gguf file or a hub id")
    p.add_argument("--host", default="127.0.0.1",
                   help="address to bind (default 127.0.0.1; use 0.0.0.0 only on a trusted network)")
    p.add_argument("--port", type=int, default=8001, help="port (default 8001)")
    p.add_argument("--served-model-name", nargs="+", default=None, metavar="NAME",
                   help="names clients may ask for (e.g. gpt-4o-mini); the first is the default "
                        "(default: the --model value)")
    p.add_argument("--default-max-tokens", type=int, default=256,
                   help="completion tokens for a chat request that names no max_tokens, "
                        "clamped to the context (default 256)")
    p.add_argument("--max-batch-size", type=int, default=16,
                   help="most requests decoded together (default 16)")
    p.add_argument("--batch-wait-ms", type=float, default=5.0,
                   help="how long a batch waits for more requests once it has one (default 5)")
    p.add_argument("--device", default="cpu", help="torch device (default cpu)")
    p.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16", "auto"])
    p.add_argument("--bf16-autocast", action="store_true", help="bfloat16 autocast on CPU")
    p.add_argument("--static-cache", type=int, default=0, metavar="TOKENS",
                   help="decode requests whose prompt plus max_tokens fit in TOKENS in a KV "
                        "cache of fixed shape, each step one CUDA-graph replay on CUDA "
                        "(default 0: the growing cache)")
    p.add_argument("--no-cuda-graphs", action="store_true",
                   help="with --static-cache, run each step eagerly instead of replaying a "
                        "captured CUDA graph")
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    p.add_argument("--allow-lora-updates", action="store_true",
                   help="accept POST /v1/load_lora_adapter and /v1/unload_lora_adapter (vLLM's "
                        "API): a peft adapter folder is served under its lora_name; trusted "
                        "clients only, as they name local folders to read")
    p.add_argument("--cache-dir", default=None,
                   help="where converted GGUF models are cached (default $MARAG_CACHE or ~/.cache/marag)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if (args.port < 1 or args.max_batch_size < 1 or args.batch_wait_ms < 0
            or args.default_max_tokens < 1 or args.static_cache < 0):
        print("marag serve-llm: --port, --max-batch-size and --default-max-tokens must be >= 1, "
              "--batch-wait-ms and --static-cache >= 0", file=sys.stderr)
        return 2
    import uvicorn

    from marag.llm.base import LLMError
    from marag.llm.hf_local import HFBackend
    from marag.llm.server import create_app

    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    try:
        backend = HFBackend(args.model, device=args.device, dtype=args.dtype,
                            max_batch_size=args.max_batch_size, batch_wait_ms=args.batch_wait_ms,
                            bf16_autocast=args.bf16_autocast, cache_dir=args.cache_dir,
                            static_cache=args.static_cache,
                            cuda_graphs=not args.no_cuda_graphs)
    except LLMError as e:
        print(f"marag serve-llm: {e}", file=sys.stderr)
        return 2
    names = args.served_model_name or [args.model]
    print(f"serving {args.model} as {', '.join(names)} on http://{args.host}:{args.port}/v1 "
          "(POST /v1/chat/completions, POST /v1/completions, GET /v1/models)", file=sys.stderr)
    if args.allow_lora_updates:
        print("LoRA updates on: POST /v1/load_lora_adapter, POST /v1/unload_lora_adapter",
              file=sys.stderr)
    app = create_app(backend, names, default_max_tokens=args.default_max_tokens,
                     allow_lora_updates=args.allow_lora_updates)
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning")
    return 0
