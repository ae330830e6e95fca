"""Every shipped config file validates and selects the method its name says."""

from pathlib import Path

import pytest

from marag.config import METHOD_NAMES, load_config
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
