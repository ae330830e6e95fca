"""Every shipped config file validates and selects the method its name says."""

from pathlib import Path

import pytest

from marag.config import load_config
from marag.methods import METHOD_NAMES
from marag.roles.registry import check_role_map

ROOT = Path(__file__).resolve().parents[1] / "configs"
# every YAML under configs/ but accelerate's own launch files
CONFIGS = sorted(p for p in ROOT.rglob("*.yaml") if p.parent.name != "accelerate")


def test_configs_exist():
    names = {p.stem for p in CONFIGS}
    assert set(METHOD_NAMES) <= names


@pytest.mark.parametrize("path", CONFIGS, ids=[str(p.relative_to(ROOT)) for p in CONFIGS])
def test_config_validates(path):
    cfg = load_config(path)
    check_role_map(cfg.roles)
    if path.stem in METHOD_NAMES:
        assert cfg.method.name == path.stem
    for role in ("planner", "QR", "AG", "mask.plan"):
        assert cfg.backend_for(role) in cfg.llms


def test_mao_arag_splits_planner_and_executors():
    cfg = load_config(Path(__file__).resolve().parents[1] / "configs" / "mao-arag.yaml")
    assert cfg.backend_for("planner") == "policy"
    assert cfg.backend_for("DS") == "executor"
    assert cfg.llms["executor"].backend == "openai"


# A run config that extends a preset must keep resolving to what its committed run trained
# with: a later change to a base file would otherwise change a committed result's recipe.
RUNS = Path(__file__).resolve().parents[1] / "docs" / "results" / "qwen-runs"
PINNED = {"jade-2b": "jade-train.yaml", "jade-2c": "jade-train-plans.yaml",
          "jade-3": "jade-train-cost.yaml", "jade-3b": "jade-train-cost-t1.yaml",
          "jade-3c": "jade-train-cost-cheap.yaml", "jade-3d": "jade-train-cost-beta0.1.yaml"}


@pytest.mark.parametrize("run,name", sorted(PINNED.items()))
def test_qwen_run_configs_resolve_to_what_their_runs_trained_with(run, name):
    saved = load_config(RUNS / run / "config.yaml")  # the run's own resolved dump
    now = load_config(ROOT / "qwen" / name, [f"train.iterations={saved.train.iterations}"])
    assert now == saved
