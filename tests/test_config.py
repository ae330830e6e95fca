import pytest

from marag.config import ConfigError, load_config


def test_defaults_are_offline_embedded():
    cfg = load_config()
    assert cfg.llms["default"].backend == "hf"
    assert cfg.llms["default"].model == "smollm2"
    assert cfg.retrieval.index == "wiki-demo"
    assert cfg.method.max_subquestions == 4
    assert cfg.method.fallback == ["R", "AG"]
    assert cfg.backend_for("planner") == "default"


def test_yaml_and_overrides(tmp_path):
    p = tmp_path / "c.yaml"
    p.write_text(
        "llms:\n  policy: {backend: openai, model: qwen, base_url: 'http://127.0.0.1:8000/v1'}\n"
        "  default: {backend: hf}\n"
        "roles: {planner: policy, default: default}\n"
        "method: {name: mao-arag, max_rounds: 5}\n"
    )
    cfg = load_config(p, ["method.max_rounds=3", "retrieval.timeout=10", "method.fallback=[AG]",
                          "llms.policy.timeout=2.5"])
    assert cfg.method.name == "mao-arag"
    assert cfg.method.max_rounds == 3
    assert cfg.retrieval.timeout == 10
    assert cfg.method.fallback == ["AG"]
    assert cfg.llms["policy"].timeout == 2.5
    assert cfg.backend_for("planner") == "policy"
    assert cfg.backend_for("AG") == "default"


@pytest.mark.parametrize("override,needle", [
    ("method.max_round=3", "unknown config key 'method.max_round' (did you mean 'max_rounds'?)"),
    ("retreival.k=3", "unknown config key 'retreival' (did you mean 'retrieval'?)"),
    ("llms.default.modle=x", "unknown config key 'llms.default.modle' (did you mean 'model'?)"),
    ("method.name=bogus", "config key 'method.name'"),
    ("retrieval.timeout=0", "config key 'retrieval.timeout'"),
    # retrieval.k was never read (method.top_k sets how many passages a method retrieves)
    ("retrieval.k=3", "unknown config key 'retrieval.k'"),
    ("method.fallback=[R, XX]", "config key 'method.fallback.1'"),
])
def test_bad_keys_and_values_are_named(override, needle):
    with pytest.raises(ConfigError) as e:
        load_config(None, [override])
    assert needle in str(e.value)


def test_file_errors(tmp_path):
    with pytest.raises(ConfigError, match="not found"):
        load_config(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("- 1\n- 2\n")
    with pytest.raises(ConfigError, match="top level must be a mapping"):
        load_config(bad)
    with pytest.raises(ConfigError, match="key=value"):
        load_config(None, ["novalue"])


def test_role_mapped_to_missing_llm():
    cfg = load_config(None, ["roles.planner=ghost"])
    with pytest.raises(ConfigError, match="ghost"):
        cfg.backend_for("planner")


def test_role_names_with_dots_can_be_overridden():
    cfg = load_config(None, ["llms.default.backend=hf", "llms.policy.backend=openai",
                             "roles.mask.search=policy",
                             "roles.mmoa.QR=policy"])
    assert cfg.roles == {"mask.search": "policy", "mmoa.QR": "policy"}
    assert cfg.backend_for("mask.search") == "policy" and cfg.backend_for("mask.plan") == "default"
