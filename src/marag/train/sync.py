"""Rollouts from an OpenAI-compatible server (``train.rollout: server``): checking that the
server's tokens are the ones the trainer scores, and handing it each new adapter.

:class:`ServerSync` owns that state: the server backend the trained roles decode on, the
local policy backend whose tokenizer and vocabulary the checks use, the adapter version the
server serves, and the folder the adapters go to. The trainer holds one (None with local
rollouts)."""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from marag.llm.trainable import TrainableBackend
from marag.train.errors import TrainError
from marag.types import Trace

if TYPE_CHECKING:
    from marag.llm.openai_http import OpenAIBackend
    from marag.train.policy import PolicyValue

log = logging.getLogger(__name__)


class SyncError(TrainError):
    """The server's rollouts cannot be trained on, or it did not take the new adapter."""


class ServerSync:
    """The rollout server of a training run and what it serves.

    ``server``: the trained roles' openai backend (its ``model`` is the adapter's name on
    the server); ``local``: the policy backend the trainer scores and updates (its tokenizer
    renders the prompts the server must have decoded from); ``policy``: the trained policy
    whose adapter is pushed; ``acc``: the accelerator (the main process writes and calls the
    server, the others wait); ``sharded``: the parameter-sharding mode (FSDP2: every process
    gathers the adapter); ``folder``: where adapter versions are written (``train.sync_dir``
    or ``OUT/sync``). ``version`` is the iteration whose adapter the server serves."""

    def __init__(self, server: OpenAIBackend, local: TrainableBackend, policy: PolicyValue,
                 acc: Any, *, folder: str | Path, sharded: str = "") -> None:
        self.server = server
        self.local = local
        self.policy = policy
        self.acc = acc
        self.folder = Path(folder)
        self.sharded = sharded
        self.version = 0

    def check(self, traces: Sequence[Trace], roles: Sequence[str]) -> None:
        """Fill and check the token ids of the trained roles' server-decoded steps.

        The prompt the trainer scores is its own rendering of the step's messages (the chat
        template the local backend uses); it must be the prompt the server decoded from: the
        server's ``prompt_token_ids`` when it sends them (vLLM's ``return_token_ids``), else
        at least its prompt token count. The response ids must be the server's own, inside
        the local vocabulary, and the answering model the trained adapter. A mismatch
        stops training instead of training on ids the server never sampled."""
        from marag.llm.chat import prompt_ids

        vocab = self.local.vocab_size
        lora = self.server.model
        bad: list[str] = []
        for trace in traces:
            for step in trace.steps:
                if not step.is_llm or step.role not in roles:
                    continue
                where = f"trace {trace.id} (sample {trace.sample}) step {step.role}"
                if step.sampling and step.sampling.get("allowed_text"):
                    bad.append(f"{where}: restricted decoding (allowed_text) is not done by the "
                               "server; set method.constrained_selector=false")
                    continue
                mine = prompt_ids(self.local.tokenizer, step.messages)
                theirs = step.prompt_token_ids
                if theirs is not None and list(theirs) != mine:
                    first = next((i for i, (a, b) in enumerate(zip(mine, theirs)) if a != b),
                                 min(len(mine), len(theirs)))
                    bad.append(f"{where}: the server's prompt token ids differ from the local "
                               f"rendering from position {first} ({len(theirs)} vs {len(mine)} "
                               "tokens): another chat template or tokenizer")
                elif theirs is None and step.prompt_tokens and step.prompt_tokens != len(mine):
                    bad.append(f"{where}: the server counted {step.prompt_tokens} prompt "
                               f"tokens, the local rendering has {len(mine)}: another chat "
                               "template or tokenizer")
                if step.token_ids and max(step.token_ids) >= vocab:
                    bad.append(f"{where}: response token id {max(step.token_ids)} is outside "
                               f"the local vocabulary ({vocab}): another tokenizer")
                if step.token_ids is not None and step.completion_tokens and (
                        len(step.token_ids) != step.completion_tokens):
                    bad.append(f"{where}: {len(step.token_ids)} token ids for "
                               f"{step.completion_tokens} completion tokens")
                if step.model and step.model != lora:
                    bad.append(f"{where}: answered by model {step.model!r}, not the trained "
                               f"adapter {lora!r}")
                step.prompt_token_ids = mine
                step.weights_version = self.version
        if bad:
            raise SyncError(f"{len(bad)} server-decoded step(s) cannot be trained on; first: "
                             + "; ".join(bad[:3]))

    def push(self, version: int) -> None:
        """Save the adapter (atomically, a new folder per version) and have the rollout
        server serve it under the trained roles' model name. The main process writes and calls
        the server (under FSDP after all processes gathered the adapter); the others wait so
        that no process rolls out before the server has the new weights."""
        import shutil

        from marag.llm.base import LLMError
        from marag.llm.lora_http import load_lora_adapter
        from marag.train.policy import full_trainable, save_backbone

        whole = full_trainable(self.policy) if self.sharded else None
        if self.acc.is_main_process:
            root = self.folder.resolve()
            root.mkdir(parents=True, exist_ok=True)
            dest = root / f"adapter-iter-{version:06d}"
            tmp = root / f".tmp-{dest.name}"
            shutil.rmtree(tmp, ignore_errors=True)
            save_backbone(self.policy, tmp, whole)
            shutil.rmtree(dest, ignore_errors=True)
            os.replace(tmp, dest)
            server = self.server
            try:
                load_lora_adapter(server.url.rsplit("/chat/completions", 1)[0], server.model,
                                  str(dest), inplace=True, timeout=server.timeout,
                                  api_key_env=server.api_key_env)
            except LLMError as e:
                raise SyncError(f"sync: {e}") from None
            for old in sorted(root.glob("adapter-iter-*"))[:-2]:  # the server read them
                shutil.rmtree(old, ignore_errors=True)
            log.info("sync: server serves %s as %s", dest, server.model)
        self.version = version
        self.acc.wait_for_everyone()
