import os
import re

import pytest

from marag.config import Config, ConfigError, load_config


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
    # so can the per-role reply limits of such roles
    cfg = load_config(None, ["method.max_tokens.deepnote.update=512",
                             "method.max_tokens.search-o1.rid=256"])
    assert cfg.method.max_tokens == {"deepnote.update": 512, "search-o1.rid": 256}


def test_openai_request_extras_and_token_alternatives():
    from marag.llm.base import SamplingParams
    from marag.llm.factory import make_llm
    from marag.llm.openai_http import OpenAIBackend

    cfg = load_config(None, ["llms.default.backend=openai", "llms.default.top_logprobs=5",
                             "llms.default.extra_body={skip_special_tokens: false}"])
    llm = make_llm(cfg.llms["default"])
    assert isinstance(llm, OpenAIBackend)
    body = llm.body([{"role": "user", "content": "hi"}], SamplingParams())
    assert body["logprobs"] is True and body["top_logprobs"] == 5
    assert body["skip_special_tokens"] is False
    # without them, nothing is asked for
    plain = make_llm(load_config(None, ["llms.default.backend=openai"]).llms["default"])
    assert "logprobs" not in plain.body([{"role": "user", "content": "hi"}], SamplingParams())
    with pytest.raises(ConfigError):
        load_config(None, ["llms.default.top_logprobs=21"])


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
    # the same config written out in full, by hand
    flat = tmp_path / "flat.yaml"
    flat.write_text(
        "llms:\n  default: {backend: hf, model: qwen2.5-coder-0.5b, max_batch_size: 16, adapter: [b, c]}\n"
        "method: {name: jade, top_k: 5, max_rounds: 6}\n"
        "train:\n  temperature: 1.0\n  lr: 1.0e-5\n"
        "  rewards: {kind: jade, alpha: 0.0, beta: 0.1, format_penalty: 1.0}\n")
    cfg = load_config(child, ["train.lr=1.0e-5"])
    assert cfg == load_config(flat)
    assert cfg.llms["default"].adapter == ["b", "c"]           # a list is replaced, not joined
    assert cfg.llms["default"].max_batch_size == 16            # the rest of the entry is kept
    assert (cfg.train.rewards.beta, cfg.train.rewards.format_penalty) == (0.1, 1.0)
    # from another working directory: extends is relative to the file naming it
    cwd = os.getcwd()
    try:
        os.chdir(tmp_path / "qwen")
        assert load_config("child.yaml", ["train.lr=1.0e-5"]) == cfg
    finally:
        os.chdir(cwd)


def test_extends_chains_and_lists_merge_in_order(tmp_path):
    (tmp_path / "a.yaml").write_text("method: {name: jade, top_k: 3, max_rounds: 4}\n")
    (tmp_path / "b.yaml").write_text("extends: a.yaml\nmethod: {top_k: 7}\n")
    (tmp_path / "c.yaml").write_text("method: {max_rounds: 2}\n")
    (tmp_path / "d.yaml").write_text("extends: [b.yaml, c.yaml]\nmethod: {name: mao-arag}\n")
    m = load_config(tmp_path / "d.yaml").method
    assert (m.name, m.top_k, m.max_rounds) == ("mao-arag", 7, 2)


def test_replace_tag_drops_the_base_entries(tmp_path):
    (tmp_path / "a.yaml").write_text(
        "llms:\n  policy: {backend: hf, share: false}\n  executor: {backend: hf}\n"
        "roles: {planner: policy, default: executor}\n")
    (tmp_path / "merged.yaml").write_text("extends: a.yaml\nroles: {default: policy}\n")
    (tmp_path / "replaced.yaml").write_text(
        "extends: a.yaml\nllms: !replace\n  default: {backend: hf}\n"
        "roles: !replace {default: default}\n")
    merged = load_config(tmp_path / "merged.yaml")
    assert merged.roles == {"planner": "policy", "default": "policy"}
    replaced = load_config(tmp_path / "replaced.yaml")
    assert replaced.roles == {"default": "default"}
    assert set(replaced.llms) == {"default"}
    (tmp_path / "bad.yaml").write_text("roles: !replace [a]\n")
    with pytest.raises(ConfigError, match="!replace tags a mapping"):
        load_config(tmp_path / "bad.yaml")


@pytest.mark.parametrize("files,needles", [
    ({"x.yaml": "extends: x.yaml\n"}, ["round in a circle", "x.yaml -> ", "x.yaml"]),
    ({"x.yaml": "extends: y.yaml\n", "y.yaml": "extends: x.yaml\n"},
     ["round in a circle", "x.yaml -> ", "y.yaml -> "]),
    ({"x.yaml": "extends: nope.yaml\n"}, ["x.yaml: 'extends: nope.yaml' names no file"]),
    ({"x.yaml": "extends: {a: 1}\n"}, ["must name a config file"]),
    ({"x.yaml": "extends: []\n"}, ["must name a config file"]),
    ({"x.yaml": "extends:\n"}, ["must name a config file"]),
    ({"x.yaml": "extends: sub\n", "sub/keep.yaml": "{}\n"}, ["sub is a directory, not a config file"]),
    ({"x.yaml": "extends: y.yaml\n", "y.yaml": "- 1\n"}, ["y.yaml: top level must be a mapping"]),
    ({"x.yaml": "extends: y.yaml\nmethod: {top_k: 4}\n", "y.yaml": "method: {max_round: 3}\n"},
     ["unknown config key 'method.max_round' (did you mean 'max_rounds'?) (set in ", "y.yaml)"]),
    ({"x.yaml": "extends: y.yaml\nmethod: {top_k: many}\n", "y.yaml": "method: {top_k: 3}\n"},
     ["config key 'method.top_k'", "(set in ", "x.yaml)"]),
])
def test_extends_errors_are_named(tmp_path, files, needles):
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    with pytest.raises(ConfigError) as e:
        load_config(tmp_path / "x.yaml")
    for needle in needles:
        assert needle in str(e.value), (needle, str(e.value))


def test_an_override_is_named_when_it_is_the_bad_value(tmp_path):
    (tmp_path / "a.yaml").write_text("method: {top_k: 3}\n")
    (tmp_path / "b.yaml").write_text("extends: a.yaml\n")
    with pytest.raises(ConfigError, match=re.escape("(set in --set method.top_k=lots)")):
        load_config(tmp_path / "b.yaml", ["method.top_k=lots"])


def test_config_command_prints_the_resolved_config(tmp_path, capsys):
    import yaml

    from marag.cli import main

    (tmp_path / "a.yaml").write_text("method: {name: jade, top_k: 3}\ntrain: {lr: 2.0e-5}\n")
    (tmp_path / "b.yaml").write_text("extends: a.yaml\nmethod: {max_rounds: 2}\n")
    assert main(["config", "--config", str(tmp_path / "b.yaml"), "--method", "mao-arag",
                 "--set", "method.top_k=4"]) == 0
    tree = yaml.safe_load(capsys.readouterr().out)
    assert tree["method"]["name"] == "mao-arag" and tree["method"]["top_k"] == 4
    assert tree["method"]["max_rounds"] == 2 and tree["train"]["lr"] == 2.0e-5
    assert load_config(tmp_path / "b.yaml", ["method.name=mao-arag", "method.top_k=4"]) \
        == Config.model_validate(tree)
    assert main(["config", "--config", str(tmp_path / "b.yaml"), "--section", "train"]) == 0
    assert list(yaml.safe_load(capsys.readouterr().out)) == ["train"]
    assert main(["config", "--section", "nope"]) == 2
    assert "no section 'nope'" in capsys.readouterr().err
