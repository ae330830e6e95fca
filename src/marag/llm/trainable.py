"""What a trainer needs from a local backend whose weights it updates in place.

``marag train`` (rollout: local, or the local policy of rollout: server) and ``marag sft``
read and update the very module the backend decodes with; they reach it through this
interface, never through a backend's private fields. :class:`marag.llm.hf_local.HFBackend`
implements it.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from marag.llm.base import Messages


@runtime_checkable
class TrainableBackend(Protocol):
    """A local backend that decodes with ``module`` and lets a trainer change its weights."""

    model: str  # the model's name (traces, run identity)
    module: Any  # the torch causal LM the backend decodes with: a trainer updates it in place
    tokenizer: Any
    adapters: tuple[str, ...]  # adapter folders merged into ``module``'s weights, in order

    @property
    def pad_id(self) -> int:
        """The token id padded batches are filled with."""
        ...

    @property
    def eos_ids(self) -> frozenset[int]:
        """Every token id that ends a completion."""
        ...

    @property
    def vocab_size(self) -> int:
        """Rows of the output head: every token id the model can emit is below it."""
        ...

    @property
    def bf16_autocast(self) -> bool:
        """Whether decoding on the CPU runs under bfloat16 autocast (as a bf16 learner
        scores, so local rollouts' logprobs match the trainer's)."""
        ...

    @bf16_autocast.setter
    def bf16_autocast(self, enabled: bool) -> None: ...

    def encode(self, messages: Messages) -> list[int]:
        """The prompt token ids of one conversation, as decoding renders it."""
        ...

    def allowed_mask(self, allowed: tuple[str, ...]) -> Any:
        """The bool vocabulary mask of decoding restricted to ``allowed``; None for all."""
        ...

    def weights_updated(self) -> int:
        """``module``'s weights changed: drop what was computed with the old ones. Returns
        the new weights version."""
        ...
