import subprocess
import sys

import pytest

from marag.cli import build_parser, main


def test_serve_llm_arguments_and_defaults():
    args = build_parser().parse_args(["serve-llm"])
    assert (args.model, args.host, args.port, args.max_batch_size) == (
        "smollm2", "127.0.0.1", 8001, 16)


def test_serve_llm_rejects_bad_arguments_and_models(capsys, tmp_path):
    assert main(["serve-llm", "--port", "0"]) == 2
    assert "--port" in capsys.readouterr().err
    assert main(["serve-llm", "--static-cache", "-1"]) == 2
    assert "--static-cache" in capsys.readouterr().err
    assert main(["serve-llm", "--model", str(tmp_path / "missing.gguf")]) == 2
    assert "GGUF file not found" in capsys.readouterr().err


def test_serve_llm_help_runs_without_heavy_imports():
    code = ("import sys; from marag.cli import build_parser; build_parser();"
            "print(any(m in sys.modules for m in ('torch', 'transformers', 'fastapi', 'uvicorn')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@pytest.mark.slow  # a subprocess that imports torch and transformers
def test_serve_llm_command_serves_a_model_folder(tiny, tmp_path, free_port):
    import asyncio
    import time

    import httpx

    from marag.llm.base import SamplingParams
    from marag.llm.openai_http import OpenAIBackend

    folder = tmp_path / "tiny"
    tiny[0].save_pretrained(folder)
    tiny[1].save_pretrained(folder)
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "marag.cli", "serve-llm", "--model", str(folder), "--port",
         str(port), "--threads", "1", "--static-cache", "256"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 90
        while True:
            assert proc.poll() is None, proc.stdout.read()
            try:
                if httpx.get(f"http://127.0.0.1:{port}/health").status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "serve-llm did not come up"
            time.sleep(0.2)

        async def ask() -> list:
            client = OpenAIBackend(f"http://127.0.0.1:{port}/v1", str(folder))
            try:
                return await client.generate([[{"role": "user", "content": "hi"}]] * 3,
                                             SamplingParams(max_tokens=5, logprobs=True))
            finally:
                await client.aclose()

        out = asyncio.run(ask())
        assert [len(c.logprobs) for c in out] == [c.completion_tokens for c in out]
        assert len({c.text for c in out}) == 1  # greedy: the same prompt, the same answer
    finally:
        proc.terminate()
        proc.wait(20)
