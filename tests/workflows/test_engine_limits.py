"""``method.max_tokens``: per-role reply limits over the roles' own."""

import pytest

from marag.config import ConfigError, load_config
from marag.llm.scripted import ScriptedLLM
from marag.roles.registry import check_roles
from marag.workflows import Context


def _limit(cfg, role: str) -> int:
    ctx = Context(llms={"default": ScriptedLLM({})}, config=cfg)
    return ctx._resolve(role, "jade").params.max_tokens


def test_a_role_limit_overrides_the_roles_own():
    base = load_config(None, [])
    own = _limit(base, "AG")
    cfg = load_config(None, ["method.max_tokens.AG=64"])
    assert _limit(cfg, "AG") == 64 != own
    assert _limit(cfg, "planner") == _limit(base, "planner")
    cfg = load_config(None, ["method.max_tokens.default=8", "method.max_tokens.AG=64"])
    assert (_limit(cfg, "planner"), _limit(cfg, "AG")) == (8, 64)


def test_a_misspelt_role_is_refused():
    with pytest.raises(ConfigError, match="method.max_tokens.AGG"):
        check_roles(load_config(None, ["method.max_tokens.AGG=64"]))
