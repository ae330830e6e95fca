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


def test_extends_merges_sections_over_the_base(tmp_path):
    (tmp_path / "qwen").mkdir()
    base = tmp_path / "base.yaml"
    base.write_text(
        "llms:\n  default: {backend: hf, model: qwen2.5-coder-0.5b, max_batch_size: 16, adapter: [a]}\n"
        "method: {name: jade, top_k: 5, max_rounds: 6}\n"
        "train:\n  temperature: 0.7\n  lr: 5.0e-5\n"
        "  rewards: {kind: jade, alpha: 0.0, beta: 0.3, format_penalty: 1.0}\n")
    child = tmp_path / "qwen" / "child.yaml"
    child.write_text("extends: ../base.yaml\n"
                     "llms:\n  default: {adapter: [b, c]}\n"
                     "train:\n  temperature: 1.0\n  rewards: {beta: 0.1}\n")
    cfg = load_config(child, ["train.lr=1.0e-5"])
    assert cfg.llms["default"].model == "qwen2.5-coder-0.5b"  # kept from the base
    assert cfg.llms["default"].max_batch_size == 16
    assert cfg.llms["default"].adapter == ["b", "c"]           # a list is replaced, not joined
    assert cfg.method.max_rounds == 6
    assert cfg.train.temperature == 1.0 and cfg.train.lr == 1.0e-5
    assert (cfg.train.rewards.kind, cfg.train.rewards.beta, cfg.train.rewards.format_penalty) \
        == ("jade", 0.1, 1.0)
    # the same config as writing every key out: what a run's config.yaml snapshot holds
    flat = tmp_path / "flat.yaml"
    import yaml
    flat.write_text(yaml.safe_dump(cfg.model_dump(mode="json")))
    assert load_config(flat) == cfg


def test_extends_chains_and_lists_merge_in_order(tmp_path):
    (tmp_path / "a.yaml").write_text("method: {name: jade, top_k: 3, max_rounds: 4}\n")
    (tmp_path / "b.yaml").write_text("extends: a.yaml\nmethod: {top_k: 7}\n")
    (tmp_path / "c.yaml").write_text("method: {max_rounds: 2}\n")
    (tmp_path / "d.yaml").write_text("extends: [b.yaml, c.yaml]\nmethod: {name: mao-arag}\n")
    m = load_config(tmp_path / "d.yaml").method
    assert (m.name, m.top_k, m.max_rounds) == ("mao-arag", 7, 2)


@pytest.mark.parametrize("files,needle", [
    ({"x.yaml": "extends: x.yaml\n"}, "round in a circle"),
    ({"x.yaml": "extends: y.yaml\n", "y.yaml": "extends: x.yaml\n"}, "round in a circle"),
    ({"x.yaml": "extends: nope.yaml\n"}, "not found: "),
    ({"x.yaml": "extends: {a: 1}\n"}, "must name a config file"),
    ({"x.yaml": "extends: []\n"}, "must name a config file"),
    ({"x.yaml": "extends: y.yaml\n", "y.yaml": "- 1\n"}, "top level must be a mapping"),
    ({"x.yaml": "extends: y.yaml\n", "y.yaml": "method: {max_round: 3}\n"},
     "unknown config key 'method.max_round'"),
])
def test_extends_errors_are_named(tmp_path, files, needle):
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    with pytest.raises(ConfigError, match=needle.replace("(", r"\(")) as e:
        load_config(tmp_path / "x.yaml")
    if "not found" in needle:
        assert "nope.yaml" in str(e.value) and "extended by" in str(e.value)
