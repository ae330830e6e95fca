import importlib.util

import pytest

from marag.llm.base import LLM, LLMError, SamplingParams
from marag.llm.llamacpp import gguf_path

HAVE_LLAMA_CPP = importlib.util.find_spec("llama_cpp") is not None


def test_gguf_path_accepts_embedded_names_and_gguf_files(tmp_path):
    assert gguf_path("smollm2").name == "SmolLM2-135M-Instruct.Q4_1.gguf"
    with pytest.raises(LLMError, match="needs a .gguf file or an embedded name"):
        gguf_path("HuggingFaceTB/SmolLM2-135M-Instruct")
    with pytest.raises(LLMError, match="GGUF file not found"):
        gguf_path(str(tmp_path / "x.gguf"))


@pytest.mark.skipif(HAVE_LLAMA_CPP, reason="llama-cpp-python is installed")
def test_missing_llama_cpp_says_how_to_install():
    from marag.llm.llamacpp import LlamaCppBackend

    with pytest.raises(LLMError, match=r"pip install 'marag\[llamacpp\]'"):
        LlamaCppBackend("smollm2")


@pytest.mark.slow
@pytest.mark.skipif(not HAVE_LLAMA_CPP, reason="llama-cpp-python is not installed")
async def test_llama_cpp_answers_with_smollm2():
    from marag.llm.llamacpp import LlamaCppBackend

    llm = LlamaCppBackend("smollm2", n_ctx=1024, n_threads=1, logprobs=True)
    assert isinstance(llm, LLM)
    convo = [{"role": "user", "content": "What is the capital of Germany?"},
             {"role": "assistant", "content": "<answer>Berlin</answer>"},
             {"role": "user", "content": "What is the capital of France?"}]
    out = await llm.generate([convo, convo], SamplingParams(max_tokens=24, logprobs=True))
    assert out[0].text == out[1].text  # greedy and serialised: the same answer twice
    assert "Paris" in out[0].text
    assert out[0].prompt_tokens > 20 and 0 < out[0].completion_tokens <= 24
    assert out[0].logprobs and len(out[0].logprobs) == out[0].completion_tokens
    [cut] = await llm.generate([convo], SamplingParams(max_tokens=24, stop=("Paris",)))
    assert "Paris" not in cut.text
    await llm.aclose()
