"""What makes two evaluation runs the same run: the config sections an evaluation reads."""

import json

import pytest

from marag.config import load_config
from marag.eval import RunDirError, open_run_dir
from marag.eval.identity import adapter_digest, config_identity


def _identity(overrides):
    return {"dataset": "nq_open", "config": config_identity(load_config(None, overrides))}


def test_train_and_sft_settings_do_not_change_the_identity():
    base = _identity(["method.name=jade"])
    assert _identity(["method.name=jade", "train.lr=1e-3", "sft.epochs=7",
                      "eval.concurrency=3"]) == base
    assert _identity(["method.name=jade", "method.top_k=2"]) != base
    assert _identity(["method.name=jade", "sampling.temperature=0.5"]) != base


def test_a_run_recorded_with_train_settings_resumes_after_they_change(tmp_path):
    new = _identity(["method.name=jade"])
    old = {**new, "config": {**new["config"], "train": {"lr": 1e-5}, "sft": {"epochs": 2}}}
    open_run_dir(tmp_path, old)  # a run directory written before train/sft left the identity
    again = open_run_dir(tmp_path, new)
    assert len(again.manifest["resumes"]) == 1 and again.manifest["identity"] == new


def test_a_different_run_names_only_what_an_evaluation_reads(tmp_path):
    new = _identity(["method.name=jade"])
    old = {**new, "limit": 5, "config": {**new["config"], "train": {"lr": 1e-5}}}
    open_run_dir(tmp_path, old)
    with pytest.raises(RunDirError) as e:
        open_run_dir(tmp_path, new)
    assert "limit: 5 -> None" in str(e.value) and "train" not in str(e.value)


def test_a_run_recorded_before_a_setting_existed_resumes_at_its_default(tmp_path):
    new = _identity(["method.name=jade"])
    method = {k: v for k, v in new["config"]["method"].items() if k != "serial_rewrite"}
    old = {**new, "config": {**new["config"], "method": method}}
    open_run_dir(tmp_path / "a", old)  # written by a marag without method.serial_rewrite
    assert len(open_run_dir(tmp_path / "a", new).manifest["resumes"]) == 1
    # the new setting away from its default is a different run
    open_run_dir(tmp_path / "b", old)
    with pytest.raises(RunDirError, match="serial_rewrite: 'replace' -> 'guarded'"):
        open_run_dir(tmp_path / "b", _identity(["method.name=jade",
                                                "method.serial_rewrite=guarded"]))


def test_a_run_recorded_with_a_setting_since_removed_is_a_different_run(tmp_path):
    new = _identity(["method.name=jade"])
    old = {**new, "config": {**new["config"],
                             "method": {**new["config"]["method"], "gone": 3}}}
    open_run_dir(tmp_path, old)
    with pytest.raises(RunDirError, match="method.gone: 3 -> None"):
        open_run_dir(tmp_path, new)


def _adapter(folder, value: float, dtype=None):
    import torch
    from safetensors.torch import save_file

    folder.mkdir(parents=True, exist_ok=True)
    (folder / "adapter_config.json").write_text('{"r": 8}')
    weight = torch.full((4, 8), value, dtype=dtype or torch.float32)
    save_file({"base_model.model.q_proj.lora_A.weight": weight},
              str(folder / "adapter_model.safetensors"))
    return str(folder)


def _adapter_identity(adapter):
    from marag.eval.identity import adapter_identity

    config = load_config(None, ["method.name=vanilla", "llms.default.backend=hf",
                                f"llms.default.adapter=[{adapter}]"])
    return {**_identity(["method.name=vanilla"]), **adapter_identity(config)}


def test_an_adapters_identity_is_its_files_digest(tmp_path):
    from marag.eval.identity import adapter_identity

    a = _adapter(tmp_path / "a", 0.25)
    first = _adapter_identity(a)["adapters"]
    assert list(first) == ["default"] and len(first["default"]) == 1
    assert _adapter_identity(_adapter(tmp_path / "b", 0.25))["adapters"] == first
    assert _adapter_identity(_adapter(tmp_path / "a", 0.5))["adapters"] != first
    assert adapter_identity(load_config(None, ["method.name=vanilla"])) == {}


def test_a_run_resumed_after_its_adapter_was_retrained_is_a_different_run(tmp_path):
    a = _adapter(tmp_path / "adapter", 0.125)
    open_run_dir(tmp_path / "run", _adapter_identity(a))
    _adapter(tmp_path / "adapter", 0.375)  # retrained into the same folder
    with pytest.raises(RunDirError, match="adapters.default"):
        open_run_dir(tmp_path / "run", _adapter_identity(a))


def test_a_short_name_that_comes_to_stand_for_other_folders_is_a_different_run(
        tmp_path, monkeypatch):
    from marag.llm import trained

    old = _adapter(tmp_path / "old", 1.0)
    new = _adapter(tmp_path / "new", 2.0)
    spec = trained.TrainedAdapter(model="smollm2", folders=(old,))
    monkeypatch.setitem(trained.TRAINED, "team-x", spec)
    open_run_dir(tmp_path / "run", _adapter_identity("team-x"))
    monkeypatch.setitem(trained.TRAINED, "team-x", trained.TrainedAdapter(
        model="smollm2", folders=(new,)))
    with pytest.raises(RunDirError, match="adapters.default"):
        open_run_dir(tmp_path / "run", _adapter_identity("team-x"))


def test_a_run_recorded_before_adapter_digests_resumes_and_records_them(tmp_path):
    ident = _adapter_identity(_adapter(tmp_path / "adapter", 0.75))
    older = {k: v for k, v in ident.items() if k != "adapters"}
    open_run_dir(tmp_path / "run", older)  # a run directory of a marag before the digests
    again = open_run_dir(tmp_path / "run", ident)
    assert len(again.manifest["resumes"]) == 1
    assert again.manifest["identity"]["adapters"] == ident["adapters"]


def test_a_run_made_under_a_names_earlier_meaning_resumes_only_under_its_new_name(
        tmp_path, monkeypatch):
    from marag.llm import trained

    first = trained.TrainedAdapter(model="smollm2", folders=(_adapter(tmp_path / "a", 1.0),))
    monkeypatch.setitem(trained.TRAINED, "team-x", first)
    ident = _adapter_identity("team-x")
    assert "adapter_names" not in ident
    older = {k: v for k, v in ident.items() if k != "adapters"}  # before the digests
    for run in ("digests", "before-digests", "kept"):
        open_run_dir(tmp_path / run, ident if run == "digests" else older)
    open_run_dir(tmp_path / "kept", ident)  # the name still means what it meant: resumes
    # re-pointed: "team-x" now stands for other folders, its earlier meaning is "team-x-old"
    monkeypatch.setitem(trained.TRAINED, "team-x-old", first)
    monkeypatch.setitem(trained.TRAINED, "team-x", trained.TrainedAdapter(
        model="smollm2", folders=(_adapter(tmp_path / "b", 2.0),), since="2026-11-30",
        before="team-x-old"))
    ident = _adapter_identity("team-x")
    assert ident["adapter_names"] == {"default": ["team-x@2026-11-30"]}
    for run in ("digests", "before-digests"):
        with pytest.raises(RunDirError, match=r"adapter_names: .*team-x stands for other "
                                              r"folders since 2026-11-30 \(its earlier "
                                              r"meaning is team-x-old\)"):
            open_run_dir(tmp_path / run, ident)
        open_run_dir(tmp_path / run, _adapter_identity("team-x-old"))  # resumes
    open_run_dir(tmp_path / "new", ident)
    open_run_dir(tmp_path / "new", ident)  # made under the new meaning: resumes
    with pytest.raises(RunDirError, match="team-x@2026-11-30"):
        open_run_dir(tmp_path / "new", _adapter_identity("team-x-old"))


def test_a_folder_named_like_a_repointed_name_is_a_folder(tmp_path, monkeypatch):
    from marag.llm import trained

    monkeypatch.setitem(trained.TRAINED, "team-x", trained.TrainedAdapter(
        model="smollm2", folders=(_adapter(tmp_path / "b", 2.0),), since="2026-11-30",
        before="team-x-old"))
    monkeypatch.chdir(tmp_path)
    _adapter(tmp_path / "team-x", 3.0)  # a folder of that name holding an adapter wins
    ident = _adapter_identity("team-x")
    assert "adapter_names" not in ident
    assert ident["adapters"] == {"default": [adapter_digest("team-x")]}


def test_an_adapter_and_its_bfloat16_stash_copy_are_the_same_adapter(tmp_path):
    """benchmarks/stash_runs.py keeps adapters rounded to bfloat16: a run restored from a
    stash on another machine must resume."""
    import importlib.util
    from pathlib import Path

    import torch

    from marag.eval.identity import adapter_digest

    root = Path(__file__).resolve().parents[2]
    spec = importlib.util.spec_from_file_location("stash_runs",
                                                  root / "benchmarks" / "stash_runs.py")
    stash = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(stash)
    trained = Path(_adapter(tmp_path / "trained", 1 / 3))  # not a bfloat16 value
    stash.save_adapter(trained, tmp_path / "stashed")
    assert (tmp_path / "stashed" / "adapter_model.safetensors").read_bytes() != (
        trained / "adapter_model.safetensors").read_bytes()
    assert adapter_digest(tmp_path / "stashed") == adapter_digest(trained)
    # a change bfloat16 keeps is another adapter
    assert adapter_digest(_adapter(tmp_path / "other", 1 / 3 + 0.01)) != adapter_digest(trained)
    assert adapter_digest(_adapter(tmp_path / "b16", 1 / 3, torch.bfloat16)) == adapter_digest(
        trained)


def test_a_run_made_before_adapter_digests_is_still_refused_for_other_changes(tmp_path):
    ident = _adapter_identity(_adapter(tmp_path / "adapter", 0.75))
    older = {k: v for k, v in ident.items() if k != "adapters"}
    open_run_dir(tmp_path / "run", {**older, "limit": 5})
    with pytest.raises(RunDirError, match="limit: 5 -> None"):
        open_run_dir(tmp_path / "run", ident)


def test_only_hf_adapters_are_hashed():
    from marag.eval.identity import adapter_identity

    config = load_config(None, ["llms.default.backend=openai", "llms.default.adapter=[x]",
                                "llms.default.base_url=http://127.0.0.1:9/v1"])
    assert adapter_identity(config) == {}


def _no_models(*_args, **_kwargs):
    raise RuntimeError("no model loads in this test")


def test_marag_eval_refuses_to_resume_once_its_adapter_changed(tmp_path, qa_data, capsys,
                                                             monkeypatch):
    import marag.api
    from marag.cli import main

    monkeypatch.setattr(marag.api, "build_context", _no_models)  # the run folder comes first
    adapter = _adapter(tmp_path / "adapter", 0.125)
    out = tmp_path / "run"
    args = ["eval", "--dataset", str(qa_data / "nq_open.questions.jsonl"), "--limit", "2",
            "--method", "vanilla", "--set", "llms.default.backend=hf", "--adapter", adapter,
            "--out", str(out), "--no-progress"]
    with pytest.raises(RuntimeError, match="no model"):
        main(args)
    recorded = json.loads((out / "run.json").read_text())["identity"]["adapters"]
    assert recorded == {"default": [adapter_digest(adapter)]}
    with pytest.raises(RuntimeError, match="no model"):  # the same adapter: the same run
        main(args)
    _adapter(tmp_path / "adapter", 0.375)  # retrained into the same folder
    assert main(args) == 2
    assert "adapters.default" in capsys.readouterr().err


def test_marag_table_cells_record_their_rows_adapters(tmp_path, qa_data, monkeypatch):
    from types import SimpleNamespace

    import marag.api
    import marag.eval.runner
    from marag.cli import main

    async def aclose():
        return None

    identities = []

    def prepare_run(questions, out, name, *, identity, **_kwargs):
        identities.append(identity)
        raise RuntimeError("stop before answering")

    monkeypatch.setattr(marag.api, "build_context",
                        lambda _config: SimpleNamespace(llms={}, aclose=aclose))
    monkeypatch.setattr(marag.eval.runner, "prepare_run", prepare_run)
    adapter = _adapter(tmp_path / "adapter", 0.25)
    assert main(["table", "mmoa-rag", "--data", str(qa_data), "--index", "wiki-demo",
                 "--rows", "vanilla-sft", "--adapter", f"vanilla-sft={adapter}", "--limit", "1",
                 "--set", "llms.default.backend=hf", "--out", str(tmp_path / "table"),
                 "--no-progress"]) == 0
    assert identities  # one per dataset of the table present in the fixtures
    assert all(i["adapters"] == {"default": [adapter_digest(adapter)]} for i in identities)
