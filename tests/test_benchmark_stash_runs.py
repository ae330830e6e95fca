"""benchmarks/stash_runs.py: a partial evaluation run and an adapter survive a fresh machine."""

from __future__ import annotations

import gzip
import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def stash():
    spec = importlib.util.spec_from_file_location("stash_runs", ROOT / "benchmarks" / "stash_runs.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _runs(tmp_path: Path) -> Path:
    import torch
    from safetensors.torch import save_file

    runs = tmp_path / "runs"
    ev = runs / "plans-b" / "AG"
    ev.mkdir(parents=True)
    (ev / "run.json").write_text(json.dumps({"identity": {"method": "llm-only"}}))
    (ev / "traces.jsonl").write_text("".join(json.dumps({"id": f"q{i}"}) + "\n" for i in range(3)))
    for it in ("iter-000001", "iter-000003"):
        ad = runs / "ppo" / "checkpoints" / it / "policy"
        ad.mkdir(parents=True)
        (ad / "adapter_config.json").write_text('{"r": 8}')
        save_file({"lora_A.weight": torch.full((2, 3), 1 / 3)}, str(ad / "adapter_model.safetensors"))
    return runs


def test_save_then_restore_on_a_fresh_machine_resumes_where_the_run_stopped(stash, tmp_path):
    from safetensors.torch import load_file

    runs = _runs(tmp_path)
    dst = tmp_path / "stash"
    lines = stash.save(runs, dst, ["plans-b/*", "ppo/checkpoints/iter-000003/policy"])
    assert "plans-b/AG: 3 traces" in lines
    with gzip.open(dst / "plans-b" / "AG" / "traces.jsonl.gz", "rt") as f:
        assert [json.loads(x)["id"] for x in f] == ["q0", "q1", "q2"]
    assert not (dst / "ppo" / "checkpoints" / "iter-000001").exists()  # not included
    packed = (dst / "plans-b/AG/traces.jsonl.gz").read_bytes()
    stash.save(runs, dst, None)  # the same content: the same bytes (git sees no change)
    assert (dst / "plans-b/AG/traces.jsonl.gz").read_bytes() == packed
    w = load_file(str(dst / "ppo/checkpoints/iter-000003/policy/adapter_model.safetensors"))
    assert str(w["lora_A.weight"].dtype) == "torch.bfloat16"

    fresh = tmp_path / "fresh"
    lines = stash.restore(dst, fresh)
    assert "plans-b/AG: 3 traces restored" in lines
    assert (fresh / "plans-b/AG/traces.jsonl").read_text() == (
        runs / "plans-b/AG/traces.jsonl").read_text()
    assert (fresh / "plans-b/AG/run.json").is_file()
    assert (fresh / "ppo/checkpoints/iter-000003/policy/adapter_config.json").read_text() == '{"r": 8}'


def test_restore_never_replaces_a_run_that_got_further(stash, tmp_path):
    runs = _runs(tmp_path)
    dst = tmp_path / "stash"
    stash.save(runs, dst)
    with open(runs / "plans-b/AG/traces.jsonl", "a") as f:
        f.write(json.dumps({"id": "q3"}) + "\n")
    lines = stash.restore(dst, runs)
    assert "plans-b/AG: kept (4 traces here, 3 stashed)" in lines
    assert len((runs / "plans-b/AG/traces.jsonl").read_text().splitlines()) == 4
    assert stash.main(["restore", str(tmp_path / "nowhere"), str(runs)]) == 2
    # a run here with fewer traces (started over with --force): saving it keeps the longer
    # stashed run, and a restore moves it aside whole, not lost
    (runs / "plans-b/AG/traces.jsonl").write_text(json.dumps({"id": "new"}) + "\n")
    (runs / "plans-b/AG/metrics.json").write_text("{}")
    assert "plans-b/AG: kept (3 traces stashed, 1 here)" in stash.save(runs, dst)
    assert "plans-b/AG: 3 traces restored" in stash.restore(dst, runs)
    aside = list((runs / "plans-b").glob("AG.before-restore-*"))
    assert len(aside) == 1 and (aside[0] / "traces.jsonl").read_text() == '{"id": "new"}\n'
    assert not (runs / "plans-b/AG/metrics.json").exists()  # the partial run is not "finished"

