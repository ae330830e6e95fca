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
