import pytest

from marag.config import Config, ConfigError, LLMConfig, Price, load_config
from marag.llm.base import LLMError
from marag.llm.factory import llm_info, make_llm, make_llms
from marag.llm.hf_local import HFBackend
from marag.llm.openai_http import OpenAIBackend
from marag.llm.pricing import charge, money


@pytest.fixture(scope="module")
def tiny_folder(tiny, tmp_path_factory):
    folder = tmp_path_factory.mktemp("tiny-hf")
    tiny[0].save_pretrained(folder)
    tiny[1].save_pretrained(folder)
    return str(folder)


def test_hf_backends_on_the_same_model_share_one_backend(tiny_folder, caplog, monkeypatch):
    monkeypatch.setattr("marag.llm.dtype.cpu_has_native_bf16", lambda: True)
    config = Config(llms={
        "policy": LLMConfig(model=tiny_folder, max_batch_size=4),
        "executor": LLMConfig(model=tiny_folder, batch_wait_ms=0),
        # sharing goes by the resolved dtype: auto is bfloat16 on this (patched) CPU
        "named": LLMConfig(model=tiny_folder, dtype="bfloat16"),
        "full": LLMConfig(model=tiny_folder, dtype="float32"),
        "api": LLMConfig(backend="openai", model="gpt-4o-mini", base_url="http://127.0.0.1:9/v1",
                         max_concurrency=2, timeout=5, retries=1),
    })
    llms = make_llms(config)
    policy, executor, named, full, api = (
        llms[k] for k in ("policy", "executor", "named", "full", "api"))
    assert isinstance(policy, HFBackend) and policy.name == "hf" and policy.model == tiny_folder
    # one model object and one batcher for both roles; the first entry's batching wins
    assert policy is executor and policy.max_batch_size == 4
    assert "share one batcher" in caplog.text
    assert named is policy and policy.dtype == "bfloat16"
    assert full is not policy and full.module is not policy.module and full.dtype == "float32"
    assert isinstance(api, OpenAIBackend) and api.model == "gpt-4o-mini"
    assert api.url == "http://127.0.0.1:9/v1/chat/completions" and api.max_concurrency == 2


def test_training_keeps_float32_on_cpu_and_records_what_it_loaded(tiny_folder, monkeypatch):
    monkeypatch.setattr("marag.llm.dtype.cpu_has_native_bf16", lambda: True)
    config = Config(llms={"default": LLMConfig(model=tiny_folder)})
    trained = make_llms(config, purpose="training")["default"]
    assert trained.dtype == "float32"
    assert str(next(trained.module.parameters()).dtype) == "torch.float32"
    served = make_llms(config)["default"]
    assert str(next(served.module.parameters()).dtype) == "torch.bfloat16"
    info = llm_info(served)
    assert info == {"backend": "hf", "model": tiny_folder, "device": "cpu",
                    "dtype": "bfloat16", "threads": info["threads"]}
    assert info["threads"] >= 1
    assert llm_info(make_llm(LLMConfig(backend="openai", model="gpt-4o"))) == {
        "backend": "openai", "model": "gpt-4o"}


def test_factory_errors_name_the_entry():
    with pytest.raises(ConfigError, match="llms.fake: backend 'scripted' is a test double"):
        make_llms(load_config(overrides=["llms.fake.backend=scripted", "roles.default=fake"]))
    default_api = make_llm(LLMConfig(backend="openai", model="gpt-4o"))
    assert default_api.url == "https://api.openai.com/v1/chat/completions"
    with pytest.raises(LLMError, match="model path .* is neither"):
        make_llm(LLMConfig(model="/no/such/model"))


def test_money_uses_config_then_list_prices():
    assert money("gpt-4o-mini", 1_000_000, 1_000_000) == pytest.approx(0.75)
    assert money("gpt-4o-mini-2024-07-18", 2_000_000, 0) == pytest.approx(0.30)
    assert money("gpt-4o", 1000, 1000) == pytest.approx(0.0125)
    mine = {"gpt-4o-mini": Price(prompt_per_million=1.0, completion_per_million=2.0),
            "qwen": Price(prompt_per_million=0.1, completion_per_million=0.1)}
    assert money("gpt-4o-mini", 500_000, 250_000, mine) == pytest.approx(1.0)
    assert charge(mine["gpt-4o-mini"], 500_000, 250_000) == pytest.approx(1.0)
    assert money("qwen-7b", 10_000_000, 0, mine) == pytest.approx(1.0)
    assert money("smollm2", 10**9, 10**9, mine) == 0.0
    with pytest.raises(ValueError):
        money("gpt-4o", -1, 0)


def test_static_cache_reaches_the_decoder_and_is_checked(tiny_folder):
    from pydantic import ValidationError

    backend = make_llm(LLMConfig(model=tiny_folder, static_cache=256, cuda_graphs=False,
                                 max_batch_size=3))
    assert backend.static_cache == 256 and backend._decoder.static_len == 256
    assert backend._decoder.cuda_graphs is False
    with pytest.raises(ValidationError, match="static_cache"):
        LLMConfig(model=tiny_folder, static_cache=-1)


def test_prefix_cache_limits_reach_the_decoder_and_are_checked(tiny_folder):
    from pydantic import ValidationError

    from marag.eval.identity import config_identity

    backend = make_llm(LLMConfig(model=tiny_folder, prefix_entries=5, prefix_tokens=1000))
    cache = backend._decoder.prefix_cache
    assert (cache.max_entries, cache.max_tokens) == (5, 1000)
    with pytest.raises(ValidationError, match="prefix_tokens"):
        LLMConfig(model=tiny_folder, prefix_tokens=0)
    # how much is cached changes no answer: a run resumes across a change of it
    a = Config(llms={"default": LLMConfig(model=tiny_folder)})
    b = Config(llms={"default": LLMConfig(model=tiny_folder, prefix_tokens=10)})
    assert config_identity(a) == config_identity(b)


def test_a_shared_backend_says_when_it_ignores_an_entrys_cache_limits(tiny_folder, caplog):
    same = make_llms(Config(llms={"a": LLMConfig(model=tiny_folder, batch_wait_ms=0),
                                  "b": LLMConfig(model=tiny_folder, batch_wait_ms=0)}))
    assert same["a"] is same["b"] and "share one batcher" not in caplog.text
    llms = make_llms(Config(llms={
        "a": LLMConfig(model=tiny_folder, batch_wait_ms=0),
        "b": LLMConfig(model=tiny_folder, batch_wait_ms=0, prefix_tokens=1000)}))
    assert llms["a"] is llms["b"] and llms["b"]._decoder.prefix_cache.max_tokens == 65536
    assert "prefix_tokens" in caplog.text
