"""Short names for the adapters marag's learning runs committed (``--adapter qwen-jade``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from marag.llm import trained
from marag.llm.base import LLMError
from marag.llm.trained import TRAINED, TrainedAdapter, resolve_adapters


@pytest.fixture
def registry(tmp_path, monkeypatch):
    for name in ("warm", "rl"):
        (tmp_path / "docs" / name).mkdir(parents=True)
        (tmp_path / "docs" / name / "adapter_config.json").write_text("{}")
    monkeypatch.setattr(trained, "repo_root", lambda: tmp_path)
    monkeypatch.setitem(TRAINED, "team", TrainedAdapter("some-model", ("docs/warm", "docs/rl")))
    return tmp_path


def test_a_name_stands_for_its_folders_in_training_order(registry):
    assert resolve_adapters(["team"], "some-model") == [str(registry / "docs" / "warm"),
                                                         str(registry / "docs" / "rl")]


def test_adapter_folders_pass_through_and_win_over_a_name(registry, tmp_path, monkeypatch):
    folder = str(registry / "docs" / "rl")
    assert resolve_adapters([folder], "any") == [folder]
    monkeypatch.chdir(tmp_path)
    (tmp_path / "team").mkdir()  # a folder of that name that holds no adapter: the name
    assert len(resolve_adapters(["team"], "some-model")) == 2
    (tmp_path / "team" / "adapter_config.json").write_text("{}")  # an adapter: the folder
    assert resolve_adapters(["team"], "other-model") == ["team"]


def test_neither_a_folder_nor_a_name_lists_the_names(registry):
    with pytest.raises(LLMError, match=r"not the name of one of marag's trained adapters "
                                       r"\(qwen-adaptive, qwen-bgm, qwen-jade, qwen-jade-2c, qwen-jade-reader, "
                                       r"qwen-mao-arag, qwen-mmoa, qwen-mmoa-sft, qwen-retrobust, "
                                       r"qwen-rrr, qwen-search-r1, team\)"):
        resolve_adapters(["teem"], "some-model")


def test_another_model_is_refused_with_the_fix(registry):
    with pytest.raises(LLMError, match="trained on some-model, not smollm2; use it with "
                                       "--model some-model"):
        resolve_adapters(["team"], "smollm2")


def test_an_installation_without_the_folders_says_where_they_ship(registry):
    (registry / "docs" / "rl" / "adapter_config.json").unlink()
    with pytest.raises(LLMError, match="ships in marag's source repository"):
        resolve_adapters(["team"], "some-model")


def test_every_registered_adapter_is_committed_and_small():
    """The registry's folders exist in this checkout, each a peft adapter of at most 40 MB."""
    root = trained.repo_root()
    for name, spec in TRAINED.items():
        for folder in spec.folders:
            path = root / folder
            assert (path / "adapter_config.json").is_file(), (name, folder)
            size = sum(f.stat().st_size for f in Path(path).iterdir() if f.is_file())
            assert size <= 40 * 2**20, (name, folder, size)


def test_a_run_command_refuses_a_wrong_adapter_before_anything_is_written(tmp_path):
    """The check runs when the config loads (``load_run_config``), so ``marag eval`` fails
    with the message and leaves no run folder behind."""
    import argparse

    from marag.commands.options import load_run_config
    from marag.config import ConfigError

    args = argparse.Namespace(config=None)
    with pytest.raises(ConfigError, match="llms.default.adapter: adapter 'qwen-jade' was "
                                          "trained on qwen2.5-coder-0.5b, not smollm2"):
        load_run_config(args, ['llms.default.adapter=["qwen-jade"]'])


def test_run_4s_team_merges_its_warm_start_before_the_rl_adapter():
    """The RL adapter of run 4 was trained over the merged SFT adapter: merged the other way
    round, its deltas would apply to weights they never saw."""
    assert TRAINED["qwen-mmoa"].folders == ("docs/results/qwen-mmoa/sft",
                                            "docs/results/qwen-mmoa/rl")
    assert TRAINED["qwen-mmoa-sft"].folders == ("docs/results/qwen-mmoa/sft",)


def test_qwen_jade_is_the_adapter_the_stated_rule_chose_and_run_2c_keeps_a_name():
    """SPLITS.md (addendum 2026-11-30 04:20 UTC): fold A's plan-label SFT alone; the team
    that was `qwen-jade` before (run 2c, SFT then PPO) answers to `qwen-jade-2c`."""
    assert TRAINED["qwen-jade"].folders == (
        "docs/results/qwen-runs/crossfit/team-s200/adapters/sft",)
    assert TRAINED["qwen-jade-2c"].folders == ("docs/results/qwen-jade/sft",
                                               "docs/results/qwen-jade/rl")


def _run_config(argv: list[str]):
    """The config ``marag <argv>`` loads, through the command's own parser."""
    from marag.cli import build_parser
    from marag.commands.eval import flag_overrides
    from marag.commands.options import load_run_config, run_overrides

    args = build_parser().parse_args(argv)
    own = flag_overrides(args) if args.command == "eval" else run_overrides(args) + args.overrides
    return load_run_config(args, own)


def test_eval_and_ask_serve_a_one_role_adapter_on_its_role_alone():
    """``--adapter qwen-mao-arag`` to ``marag eval``: the planner it was trained for takes it,
    the executors it was trained beside run the untrained model; RRR's rewriter brings the
    generator its run had (its team)."""
    from marag.llm.trained import ROLE_LLM

    base = ["--model", "qwen2.5-coder-0.5b"]
    mao = _run_config(["eval", *base, "--method", "mao-arag", "--adapter", "qwen-mao-arag",
                       "--dataset", "x.jsonl"])
    assert mao.backend_for("planner") == ROLE_LLM
    assert mao.llms[ROLE_LLM].adapter == ["qwen-mao-arag"]
    assert mao.backend_for("AG") == "default" and mao.llms["default"].adapter == []
    rrr = _run_config(["ask", *base, "--method", "rrr", "--adapter", "qwen-rrr", "what?"])
    assert rrr.backend_for("mmoa.QR") == ROLE_LLM
    assert rrr.llms["default"].adapter == ["qwen-mmoa-sft"]
    bgm = _run_config(["ask", *base, "--method", "bgm", "--adapter", "qwen-bgm", "what?"])
    assert bgm.backend_for("DS") == ROLE_LLM and bgm.llms[ROLE_LLM].adapter == ["qwen-bgm"]
    assert bgm.backend_for("AG") == "default"
    assert bgm.llms["default"].adapter == ["qwen-mmoa-sft"]
    # an adapter for every role, or a folder: merged into the default LLM, as before
    jade = _run_config(["eval", *base, "--method", "jade", "--adapter", "qwen-jade",
                        "--dataset", "x.jsonl"])
    assert set(jade.llms) == {"default"} and jade.llms["default"].adapter == ["qwen-jade"]
    folder = trained.repo_root() / "docs/results/qwen-mao-arag/rl"
    path = _run_config(["eval", *base, "--method", "mao-arag", "--adapter", str(folder),
                        "--dataset", "x.jsonl"])
    assert set(path.llms) == {"default"} and path.llms["default"].adapter == [str(folder)]


def test_train_and_sft_merge_a_one_role_adapter_as_the_policys_warm_start():
    cfg = _run_config(["train", "--model", "qwen2.5-coder-0.5b", "--adapter", "qwen-rrr",
                       "--out", "x"])
    assert set(cfg.llms) == {"default"} and cfg.llms["default"].adapter == ["qwen-rrr"]


def test_a_one_role_adapter_beside_another_is_refused_with_the_fix():
    from marag.config import ConfigError

    with pytest.raises(ConfigError, match="serves the role planner alone .* give it alone"):
        _run_config(["eval", "--model", "qwen2.5-coder-0.5b", "--adapter", "qwen-jade",
                     "--adapter", "qwen-mao-arag", "--dataset", "x.jsonl"])


def test_a_one_role_adapter_refuses_what_would_run_it_otherwise_than_it_trained():
    from marag.config import ConfigError

    ev = ["eval", "--dataset", "x.jsonl"]
    with pytest.raises(ConfigError, match="is mao-arag's planner role, trained in that "
                                          "method: run it with --method mao-arag .* is jade"):
        _run_config([*ev, "--model", "qwen2.5-coder-0.5b", "--adapter", "qwen-mao-arag"])
    with pytest.raises(ConfigError, match="--adapter qwen-rrr was trained on "
                                          "qwen2.5-coder-0.5b, not smollm2"):
        _run_config([*ev, "--method", "rrr", "--adapter", "qwen-rrr"])
    # a --set of another LLM's adapters is not silently replaced by the run's team
    with pytest.raises(ConfigError, match=r"llms.default.adapter=\['qwen-jade'\] already "
                                          "sets adapters: drop one of the two"):
        _run_config([*ev, "--model", "qwen2.5-coder-0.5b", "--method", "rrr", "--adapter",
                     "qwen-rrr", "--set", "llms.default.adapter=[qwen-jade]"])


def test_a_config_made_for_the_one_role_adapter_runs_as_it_is():
    cfg = _run_config(["eval", "--config", "configs/qwen/adaptive-rag.yaml", "--adapter",
                       "qwen-adaptive", "--dataset", "x.jsonl"])
    assert cfg.backend_for("adaptive.classify") == "trained"
    assert cfg.llms["trained"].adapter == ["qwen-adaptive"]


def test_marag_config_shows_the_placement_eval_runs(capsys):
    import yaml

    from marag.cli import main

    assert main(["config", "--model", "qwen2.5-coder-0.5b", "--method", "adaptive-rag",
                 "--adapter", "qwen-adaptive"]) == 0
    tree = yaml.safe_load(capsys.readouterr().out)
    assert tree["roles"]["adaptive.classify"] == "trained"
    assert tree["llms"]["trained"]["adapter"] == ["qwen-adaptive"]
    assert tree["llms"]["default"]["adapter"] == []


def test_a_served_run_refuses_a_one_role_adapter_written_into_a_shared_llm():
    """A one-role name in ``llms.default.adapter`` (a YAML config or ``--set``) would reach
    every role: ask, eval and serve refuse it with the fix; train and sft merge it on
    purpose."""
    from marag.config import ConfigError

    model = ["--model", "qwen2.5-coder-0.5b", "--method", "mao-arag"]
    shared = ["--set", "llms.default.adapter=[qwen-mao-arag]"]
    for argv in (["eval", "--dataset", "x.jsonl"], ["ask", "what?"], ["serve"]):
        with pytest.raises(ConfigError, match=r"llms.default.adapter names qwen-mao-arag, "
                                              r"trained for the role planner of mao-arag alone"
                                              r", but llms.default serves every role"):
            _run_config([*argv, *model, *shared])
    # the fix the message gives, followed as written, runs
    fix = ["--set", "roles.planner=trained",
           "--set", ("llms.trained={backend: hf, model: qwen2.5-coder-0.5b, "
                     "adapter: [qwen-mao-arag]}")]
    cfg = _run_config(["eval", "--dataset", "x.jsonl", *model, *fix])
    assert cfg.backend_for("planner") == "trained" and cfg.backend_for("AG") == "default"
    with pytest.raises(ConfigError, match=r"llms.trained also serves AG: map roles.AG to "
                                          r"another LLM \(e.g. default\)"):
        _run_config(["eval", "--dataset", "x.jsonl", *model, *fix, "--set", "roles.AG=trained"])
    for argv in (["train", "--out", "x"], ["sft", "--recipe", "answers", "--out", "x"]):
        warm = _run_config([*argv, *model, *shared])
        assert warm.llms["default"].adapter == ["qwen-mao-arag"]


def _config(llms: dict, roles: dict):
    from marag.config import Config

    return Config.model_validate({"llms": llms, "roles": roles})


QWEN = {"backend": "hf", "model": "qwen2.5-coder-0.5b"}


@pytest.mark.parametrize(("llms", "roles", "refused"), [
    # the default LLM serves every role without one of its own
    ({"default": {**QWEN, "adapter": ["qwen-rrr"]}}, {}, "llms.default serves every role"),
    # an LLM of its own for the trained role: served as trained
    ({"default": QWEN, "trained": {**QWEN, "adapter": ["qwen-rrr"]}},
     {"mmoa.QR": "trained"}, None),
    # that LLM also serves another role
    ({"default": QWEN, "trained": {**QWEN, "adapter": ["qwen-rrr"]}},
     {"mmoa.QR": "trained", "mmoa.AG": "trained"}, "llms.trained also serves mmoa.AG"),
    # roles.default names another LLM, so llms.default serves the trained role alone (the
    # layout of RRR's own training config)
    ({"default": {**QWEN, "adapter": ["qwen-rrr"]}, "reader": QWEN},
     {"default": "reader", "mmoa.QR": "default"}, None),
    # an adapter for every role, or a folder: nothing to place
    ({"default": {**QWEN, "adapter": ["qwen-jade"]}}, {}, None),
    ({"default": {**QWEN, "adapter": ["docs/results/qwen-rrr/rl"]}}, {}, None),
    # a backend that merges no adapter
    ({"default": {"backend": "openai", "model": "m", "base_url": "http://x",
                  "adapter": ["qwen-rrr"]}}, {}, None),
])
def test_misplaced_role_adapters_knows_which_roles_an_llm_serves(llms, roles, refused):
    problems = trained.misplaced_role_adapters(_config(llms, roles))
    if refused is None:
        assert problems == []
    else:
        assert len(problems) == 1 and refused in problems[0]
        assert "trained for the role mmoa.QR of rrr alone" in problems[0]


def test_marag_config_warns_of_what_eval_would_refuse(capsys):
    from marag.cli import main

    assert main(["config", "--model", "qwen2.5-coder-0.5b", "--method", "rrr",
                 "--set", "llms.default.adapter=[qwen-rrr]", "--section", "roles"]) == 0
    err = capsys.readouterr().err
    assert "warning: ask, eval and serve refuse this config: llms.default.adapter names " \
           "qwen-rrr" in err
