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
                                       r"\(qwen-adaptive, qwen-jade, qwen-jade-reader, qwen-mao-arag, "
                                       r"qwen-mmoa, qwen-mmoa-sft, qwen-retrobust, qwen-rrr, qwen-search-r1, team\)"):
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
