"""Which llms entries a training run decodes and trains on, checked from the config alone.

``check_topology`` is pure: it reads a :class:`~marag.config.Config` and loads nothing, so
``marag train`` refuses a setup that cannot train before any model, index or run folder is
touched, and the trainer calls it again for configs built in code. It refuses:

* trained roles spread over several llms entries (they share one backbone);
* a frozen role on the trained roles' entry (the trained adapter would change it too);
* with ``train.rollout: server``: a trained entry that is not ``backend: openai`` with
  ``token_ids: true``; full fine-tuning; a ``train.policy_llm`` that is missing, not an
  ``hf`` entry, decoded on by some role, or merges an adapter;
* with ``train.rollout: local``: trained roles on a backend other than ``hf``.

What the config cannot say stays in the trainer (``Trainer._backends``): whether two llms
entries resolved to one shared model (hf entries naming the same model share it unless
``share: false``), so that a frozen role or a decoding role reaches the trained weights
through another entry; and whether the backend objects of a context built in code are the
kinds the config names.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from marag.config import Config, ConfigError
from marag.methods import REGISTRY
from marag.train.errors import TrainError

# Every LLM role each method can run, and the roles it trains by default (train.roles
# empty): the papers' choices, from the method registry.
METHOD_ROLES: dict[str, tuple[str, ...]] = {m.name: m.roles for m in REGISTRY}
DEFAULT_ROLES: dict[str, tuple[str, ...]] = {m.name: m.trained for m in REGISTRY}


class TopologyError(TrainError, ConfigError):
    """The llms entries of a training config cannot train together (the message says what to
    change). A config error for the CLI, a training error for the trainer's callers."""


@dataclass(frozen=True)
class Topology:
    """The llms entries of a run that can train: the trained ``roles`` decode on
    ``rollout_llm``; the trainer scores and updates the hf model of ``policy_llm`` (the same
    entry with local rollouts, ``train.policy_llm`` with a server)."""

    roles: tuple[str, ...]
    rollout_llm: str
    policy_llm: str

    @property
    def server(self) -> bool:
        """Whether the trained roles decode on a server apart from the trained model."""
        return self.rollout_llm != self.policy_llm


def trained_roles(config: Config) -> list[str]:
    """``train.roles``, or the method's default trained roles; each must be a role the method
    runs."""
    from marag.methods import check_trainable
    from marag.roles import ROLES

    try:
        check_trainable(config.method.name)
    except ValueError as e:
        raise TopologyError(str(e)) from None
    roles = list(config.train.roles) or list(DEFAULT_ROLES[config.method.name])
    unknown = [r for r in roles if r not in ROLES]
    if unknown:
        raise ConfigError(f"train.roles: unknown role(s) {unknown}; known: {sorted(ROLES)}")
    runs = METHOD_ROLES[config.method.name]
    idle = [r for r in roles if r not in runs]
    if idle:
        raise ConfigError(f"train.roles: {idle} never run in method {config.method.name} "
                          f"(its roles: {list(runs)})")
    return roles


def check_topology(config: Config) -> Topology:
    """The run's :class:`Topology`, or a :class:`TopologyError` (a ``ConfigError`` and a
    ``TrainError``) saying why the config's llms entries cannot train together."""
    roles = trained_roles(config)
    entries = {config.backend_for(r) for r in roles}
    if len(entries) != 1:
        raise TopologyError(f"trained roles {roles} run on several LLMs {sorted(entries)}; "
                            "they must share one backbone (one llms entry)")
    name = entries.pop()
    frozen = frozen_roles_on(config, roles, lambda entry: entry == name)
    if frozen:
        raise TopologyError(frozen_message(frozen, name))
    if config.train.rollout == "server":
        _check_server(config, name)
        policy = _check_local_policy(config, name)
        return Topology(tuple(roles), name, policy)
    backend = config.llms[name].backend
    if backend != "hf":
        raise TopologyError(
            f"trained roles run on llms.{name} ({backend}); training needs the local 'hf' "
            "backend, or train.rollout: server with an openai backend (frozen roles may use "
            "any backend)")
    return Topology(tuple(roles), name, name)


def frozen_roles_on(config: Config, roles: list[str], on: Callable[[str], bool]) -> list[str]:
    """The method's roles that run (not skipped), are not trained and decode on an llms
    entry for which ``on(entry name)`` holds."""
    skipped = config.method.skip_codes  # never run, so never changed
    return [r for r in METHOD_ROLES[config.method.name] if r not in roles
            and r not in skipped and on(config.backend_for(r))]


def roles_on(config: Config, on: Callable[[str], bool]) -> list[str]:
    """Every role of the method that decodes on an llms entry for which ``on`` holds."""
    return [r for r in METHOD_ROLES[config.method.name] if on(config.backend_for(r))]


def frozen_message(frozen: list[str], name: str) -> str:
    return (f"frozen role(s) {frozen} run on the policy's model (llms.{name}): the trained "
            "adapter would change them too. Map them to another llms entry with "
            "'share: false' (see configs/mao-arag-train.yaml)")


def users_message(users: list[str], name: str, rollout: str) -> str:
    return (f"role(s) {users} decode on llms.{name}, the local policy that training changes; "
            f"with train.rollout: server no role runs on it (the trained ones run on "
            f"llms.{rollout})")


def _check_server(config: Config, name: str) -> None:
    """rollout: server: the trained roles' backend must return the sampled token ids, and
    the server can only reload an adapter."""
    entry = config.llms[name]
    if entry.backend != "openai" or not entry.token_ids:
        raise TopologyError(
            "train.rollout: server needs the trained roles on an 'openai' backend with "
            f"'token_ids: true' (vLLM or marag serve-llm); llms.{name} is {entry.backend}"
            f"{' without token_ids' if entry.backend == 'openai' else ''}")
    if not config.train.lora.enabled:
        raise TopologyError(
            "train.rollout: server with full fine-tuning (train.lora.enabled: false) would "
            "need the full weights sent to the server after every update, which marag does "
            "not do; train a LoRA adapter (the server reloads it) or use rollout: local")


def _check_local_policy(config: Config, rollout: str) -> str:
    """rollout: server: ``train.policy_llm``, the hf entry the trainer scores and updates,
    which no role decodes on. Returns its name."""
    name = config.train.policy_llm
    if name is None or name not in config.llms:
        raise TopologyError(
            "train.rollout: server needs train.policy_llm naming the llms entry of the "
            "local policy (backend hf, the server's base model) that the trainer scores "
            f"and updates; llms has {sorted(config.llms)}")
    if config.llms[name].backend != "hf":
        raise TopologyError(f"train.policy_llm: llms.{name} must be an 'hf' backend")
    users = roles_on(config, lambda entry: entry == name)
    if users:
        raise TopologyError(users_message(users, name, rollout))
    if config.llms[name].adapter:
        raise TopologyError(
            f"llms.{name}.adapter is merged into the local policy, but the server only "
            "has the base model and the trained adapter; serve a model folder with that "
            "adapter merged and load it without adapters on both sides")
    return name
