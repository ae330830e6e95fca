"""Per-model prompt profiles (marag.roles.model_profiles)."""

from __future__ import annotations

import pytest

from marag.roles.model_profiles import MODEL_PROFILES, profile_for, role_prompts
from marag.roles.variants import get_variant

QWEN = "fact-example-best-last-open"


@pytest.mark.parametrize("model", [
    "qwen2.5-coder-0.5b", "/root/.cache/marag/models/qwen2.5-coder-0.5b/",
    "Qwen/Qwen2.5-Coder-0.5B-Instruct"])
def test_the_model_name_selects_the_profile_however_it_is_written(model):
    assert profile_for(model) == {"AG": QWEN}


@pytest.mark.parametrize("model", ["smollm2", "gemma3-270m", "", "gpt-4o-mini"])
def test_other_models_keep_the_default_prompts(model):
    assert profile_for(model) == {}


def test_role_prompts_win_and_the_paper_profile_or_the_switch_turn_it_off():
    assert role_prompts("qwen2.5-coder-0.5b", {"AG": "zeroshot"}) == {"AG": "zeroshot"}
    assert role_prompts("qwen2.5-coder-0.5b", {"DS": "open"}) == {"AG": QWEN, "DS": "open"}
    assert role_prompts("qwen2.5-coder-0.5b", {}, prompts="paper") == {}
    assert role_prompts("qwen2.5-coder-0.5b", {}, enabled=False) == {}


def test_every_profile_names_variants_that_exist():
    for profile in MODEL_PROFILES.values():
        for role, variant in profile.items():
            assert get_variant(role, variant).name == role


def _config(*overrides: str):
    from marag.config import load_config

    return load_config(None, list(overrides))


def test_a_run_records_the_variants_its_roles_use_and_the_profiles_behind_them():
    from marag.roles.model_profiles import profiles_used, resolved

    qwen = _config("llms.default.model=/root/.cache/marag/models/qwen2.5-coder-0.5b")
    assert resolved(qwen) == {"AG": QWEN}
    assert profiles_used(qwen) == {"default": "qwen2.5-coder-0.5b"}
    both = _config("llms.default.model=qwen2.5-coder-0.5b", "method.role_prompts.DS=open")
    assert resolved(both) == {"AG": QWEN, "DS": "open"}
    assert resolved(_config("llms.default.model=smollm2")) == {}
    assert profiles_used(_config("llms.default.model=smollm2")) == {}
    off = _config("llms.default.model=qwen2.5-coder-0.5b", "method.model_prompts=false")
    assert resolved(off) == {} and profiles_used(off) == {}
    assert resolved(_config("llms.default.model=qwen2.5-coder-0.5b", "method.prompts=paper")) == {}


def test_the_manifest_and_report_name_the_variants_a_run_used(tmp_path):
    import json

    from marag.commands.eval import record_llms
    from marag.eval.run_markdown import run_markdown
    from marag.eval.rundir import open_run_dir
    from marag.eval.summary import summarize

    run = open_run_dir(tmp_path / "run", {"method": "vanilla"})
    record_llms(run, {}, _config("llms.default.model=qwen2.5-coder-0.5b"))
    saved = json.loads((tmp_path / "run" / "run.json").read_text())
    assert saved["role_prompts"] == {"AG": QWEN}
    assert saved["model_profiles"] == {"default": "qwen2.5-coder-0.5b"}
    text = run_markdown(saved, summarize([]))
    assert (f"- prompt variants: AG={QWEN} (model profiles: default: qwen2.5-coder-0.5b)"
            in text)
    record_llms(run, {}, _config("llms.default.model=smollm2"))
    saved = json.loads((tmp_path / "run" / "run.json").read_text())
    assert saved["role_prompts"] == {}
    assert "prompt variants" not in run_markdown(saved, summarize([]))
