"""check_topology: which llms entries can train together, decided from the config alone
(no model, index or server), with the messages the trainer gave when it decided them."""

from __future__ import annotations

from pathlib import Path

import pytest

from marag.config import ConfigError, load_config
from marag.train.errors import TrainError
from marag.train.topology import Topology, TopologyError, check_topology

CONFIGS = Path(__file__).resolve().parents[2] / "configs"

# a server topology that trains: jade-server-train.yaml's llms, in overrides
SERVER = ["llms.rollout.backend=openai", "llms.rollout.base_url=http://127.0.0.1:9/v1",
          "llms.rollout.model=policy-lora", "llms.rollout.token_ids=true",
          "llms.policy.backend=hf", "roles.default=rollout", "train.rollout=server",
          "train.policy_llm=policy"]


def refused(*overrides: str, match: str) -> None:
    config = load_config(None, list(overrides))
    with pytest.raises(TopologyError, match=match) as e:
        check_topology(config)
    # the CLI reports it as a config error; the trainer's callers catch a training error
    assert isinstance(e.value, ConfigError) and isinstance(e.value, TrainError)


def test_topologies_that_train_are_accepted():
    assert check_topology(load_config(None, ["method.name=llm-only"])) == Topology(
        ("AG",), "default", "default")
    top = check_topology(load_config(None, ["method.name=jade", *SERVER]))
    assert (top.rollout_llm, top.policy_llm, top.server) == ("rollout", "policy", True)
    assert "planner" in top.roles
    # the presets: frozen executors on an entry of their own, a server, a skipped role
    mao = check_topology(load_config(CONFIGS / "mao-arag-train.yaml"))
    assert mao.roles == ("planner",) and not mao.server
    assert check_topology(load_config(CONFIGS / "jade-server-train.yaml")).server
    assert "DS" not in check_topology(load_config(CONFIGS / "jade-no-ds-train.yaml")).roles
    # one server, two model names: the trained rewriter's adapter and the frozen reader's
    rrr = check_topology(load_config(CONFIGS / "rrr-server-train.yaml"))
    assert (rrr.roles, rrr.rollout_llm, rrr.server) == (("mmoa.QR",), "rollout", True)


def test_an_inference_only_method_is_refused_with_its_reason():
    refused("method.name=self-rag", match="method 'self-rag' is inference-only: ")


def test_trained_roles_on_several_llms_are_refused():
    refused("method.name=jade", "llms.default.backend=hf", "llms.other.backend=hf", "roles.AG=other",
            match=r"run on several LLMs \['default', 'other'\]")


def test_a_frozen_role_on_the_trained_entry_is_refused():
    refused("method.name=mao-arag", match=r"frozen role\(s\) \['QR'.*share: false")


def test_local_rollouts_need_an_hf_entry():
    refused("method.name=llm-only", "llms.default.backend=openai",
            match=r"llms.default \(openai\); training needs the local 'hf' backend")


def test_server_rollouts_need_an_openai_entry_with_token_ids():
    refused("method.name=llm-only", *SERVER, "llms.rollout.token_ids=false",
            match="'token_ids: true'.*llms.rollout is openai without token_ids")
    refused("method.name=llm-only", *SERVER, "llms.rollout.backend=hf",
            match="'token_ids: true'.*llms.rollout is hf$")


def test_server_rollouts_refuse_full_fine_tuning():
    refused("method.name=llm-only", *SERVER, "train.lora.enabled=false",
            match="full fine-tuning")


def test_server_rollouts_need_a_policy_llm_hf_entry_nobody_decodes_on():
    refused("method.name=llm-only", *SERVER, "train.policy_llm=nope",
            match=r"train.policy_llm naming.*llms has \['policy', 'rollout'\]")
    refused("method.name=llm-only", *[o for o in SERVER if "policy_llm" not in o],
            match="needs train.policy_llm")
    refused("method.name=llm-only", *SERVER, "llms.policy.backend=llamacpp",
            match="llms.policy must be an 'hf' backend")
    refused("method.name=jade", *SERVER, "roles.AS=policy",
            "train.roles=[planner,QR,QDS,QDP,DS,AG]",
            match=r"role\(s\) \['AS'\] decode on llms.policy.*run on llms.rollout")
    refused("method.name=llm-only", *SERVER, "llms.policy.adapter=runs/sft/policy",
            match="llms.policy.adapter is merged into the local policy")


def test_marag_train_refuses_a_topology_before_anything_loads(tmp_path, capsys, monkeypatch):
    from marag import api
    from marag.cli import main

    def no_context(*args, **kwargs):
        raise AssertionError("a context was built for a config that cannot train")

    monkeypatch.setattr(api, "build_context", no_context)
    out = tmp_path / "run"
    code = main(["train", "--method", "mao-arag", "--out", str(out)])
    assert code == 2
    assert "config error: frozen role(s)" in capsys.readouterr().err
    assert not out.exists()
