import pytest

from marag.config import Config, ConfigError, LLMConfig, Price, load_config
from marag.llm.base import LLMError
from marag.llm.factory import make_llm, make_llms
from marag.llm.hf_local import HFBackend
from marag.llm.openai_http import OpenAIBackend
from marag.llm.pricing import charge, money


@pytest.fixture(scope="module")
def tiny_folder(tiny, tmp_path_factory):
    folder = tmp_path_factory.mktemp("tiny-hf")
    tiny[0].save_pretrained(folder)
    tiny[1].save_pretrained(folder)
    return str(folder)


def test_hf_backends_on_the_same_model_share_one_backend(tiny_folder, caplog):
    config = Config(llms={
        "policy": LLMConfig(model=tiny_folder, max_batch_size=4),
        "executor": LLMConfig(model=tiny_folder, batch_wait_ms=0),
        "half": LLMConfig(model=tiny_folder, dtype="bfloat16"),
        "api": LLMConfig(backend="openai", model="gpt-4o-mini", base_url="http://127.0.0.1:9/v1",
                         max_concurrency=2, timeout=5, retries=1),
    })
    llms = make_llms(config)
    policy, executor, half, api = (llms[k] for k in ("policy", "executor", "half", "api"))
    assert isinstance(policy, HFBackend) and policy.name == "hf" and policy.model == tiny_folder
    # one model object and one batcher for both roles; the first entry's batching wins
    assert policy is executor and policy.max_batch_size == 4
    assert "share one batcher" in caplog.text
    assert half is not policy and half.module is not policy.module
    assert isinstance(api, OpenAIBackend) and api.model == "gpt-4o-mini"
    assert api.url == "http://127.0.0.1:9/v1/chat/completions" and api.max_concurrency == 2


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
