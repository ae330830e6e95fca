"""Rollouts from an OpenAI-compatible server (``train.rollout: server``): checking that the
server's tokens are the ones the trainer scores, and handing it each new adapter. ``tr`` is
the :class:`~marag.train.trainer.Trainer` whose policy, roles and server these use."""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from marag.train.errors import TrainError
from marag.types import Trace

log = logging.getLogger(__name__)


class SyncError(TrainError):
    """The server's rollouts cannot be trained on, or it did not take the new adapter."""


def check_server_tokens(tr: Any, traces: Sequence[Trace]) -> None:
    """Fill and check the token ids of the trained roles' server-decoded steps.

    The prompt the trainer scores is its own rendering of the step's messages (the chat
    template the local backend uses); it must be the prompt the server decoded from: the
    server's ``prompt_token_ids`` when it sends them (vLLM's ``return_token_ids``), else
    at least its prompt token count. The response ids must be the server's own, inside
    the local vocabulary, and the answering model the trained adapter. A mismatch
    stops training instead of training on ids the server never sampled."""
    from marag.llm.chat import prompt_ids

    vocab = tr.backend.vocab_size
    lora = tr.server.model
    bad: list[str] = []
    for trace in traces:
        for step in trace.steps:
            if not step.is_llm or step.role not in tr.roles:
                continue
            where = f"trace {trace.id} (sample {trace.sample}) step {step.role}"
            if step.sampling and step.sampling.get("allowed_text"):
                bad.append(f"{where}: restricted decoding (allowed_text) is not done by the "
                           "server; set method.constrained_selector=false")
                continue
            mine = prompt_ids(tr.tokenizer, step.messages)
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
            step.weights_version = tr._pushed
    if bad:
        raise SyncError(f"{len(bad)} server-decoded step(s) cannot be trained on; first: "
                         + "; ".join(bad[:3]))

def push_adapter(tr: Any, version: int) -> None:
    """Save the adapter (atomically, a new folder per version) and have the rollout
    server serve it under the trained roles' model name. The main process writes and calls
    the server (under FSDP after all processes gathered the adapter); the others wait so
    that no process rolls out before the server has the new weights."""
    import shutil

    from marag.llm.base import LLMError
    from marag.llm.lora_http import load_lora_adapter
    from marag.train.policy import full_trainable, save_backbone

    whole = full_trainable(tr.policy) if tr.sharded else None
    if tr.acc.is_main_process:
        root = Path(tr.cfg.sync_dir or tr.out / "sync").resolve()
        root.mkdir(parents=True, exist_ok=True)
        dest = root / f"adapter-iter-{version:06d}"
        tmp = root / f".tmp-{dest.name}"
        shutil.rmtree(tmp, ignore_errors=True)
        save_backbone(tr.policy, tmp, whole)
        shutil.rmtree(dest, ignore_errors=True)
        os.replace(tmp, dest)
        server = tr.server
        try:
            load_lora_adapter(server.url.rsplit("/chat/completions", 1)[0], server.model,
                              str(dest), inplace=True, timeout=server.timeout,
                              api_key_env=server.api_key_env)
        except LLMError as e:
            raise SyncError(f"sync: {e}") from None
        for old in sorted(root.glob("adapter-iter-*"))[:-2]:  # the server read them
            shutil.rmtree(old, ignore_errors=True)
        log.info("sync: server serves %s as %s", dest, server.model)
    tr._pushed = version
    tr.acc.wait_for_everyone()
