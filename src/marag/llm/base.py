"""The LLM backend protocol: a batch of chat conversations in, one Completion each out."""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from marag.types import Completion

Messages = list[dict[str, str]]

# The role whose call is in flight. The workflow engine sets it around every LLM call; it
# follows asyncio tasks, so backends can key behaviour or statistics by role without the
# protocol carrying it (the scripted test backend answers by role).
current_role: ContextVar[str] = ContextVar("marag_current_role", default="")


class LLMError(RuntimeError):
    """A backend could not produce completions (dead endpoint after retries, bad model path...)."""


class PromptError(LLMError):
    """One request's own prompt cannot be decoded (empty, too long, a token id the model does
    not have). Only that request fails; the requests batched beside it are not affected."""


@dataclass(frozen=True, slots=True)
class SamplingParams:
    temperature: float = 0.0  # 0 means greedy
    top_p: float = 1.0
    max_tokens: int = 128
    stop: tuple[str, ...] = ()
    seed: int | None = None
    # end of text and the stop strings do not end a reply before this many tokens (vLLM's
    # ``min_tokens``): a continued open turn that the model would otherwise close at once
    min_tokens: int = 0
    logprobs: bool = False  # ask for per-token logprobs and token ids (training needs them)
    # Restrict decoding to these strings' tokens (MMOA-RAG's id-only selector); local backends.
    allowed_text: tuple[str, ...] = field(default=())
    # the hf backend's prefix cache keeps this whole prompt's KV (all but its last token),
    # not only its leading turns: a later call that repeats the prompt, grown at its end
    # (a continued trajectory) or in its middle (IRCoT's next step), then computes only from
    # where it departs from this one. The text is the same up to floating-point rounding, as
    # with leading turns; other backends ignore it (a vLLM server caches prefixes by itself;
    # ``marag serve-llm`` keeps leading turns only)
    cache_prompt: bool = False
    # the hf backend ends a reply as soon as this returns True for its text so far (after
    # ``min_tokens``): the caller's parser would read nothing more from it (IRCoT keeps a
    # line's first sentence). The text is kept as written, not cut; other backends ignore it
    stop_when: Callable[[str], bool] | None = None

    def __post_init__(self) -> None:
        if self.min_tokens < 0:
            raise ValueError(f"min_tokens must be >= 0, got {self.min_tokens}")

    def replace(self, **changes: object) -> SamplingParams:
        from dataclasses import replace

        return replace(self, **changes)  # type: ignore[arg-type]


def first_stop(text: str, stop: tuple[str, ...], start: int = 0) -> int:
    """Where the first stop string that counts begins in ``text``, or -1.

    A stop string counts only if it ends after ``start`` (the length of the first
    ``min_tokens`` tokens' text, vLLM's rule): it may begin inside those tokens."""
    found = [text.find(s, max(0, start - len(s) + 1)) for s in stop if s]
    return min((i for i in found if i >= 0), default=-1)


@runtime_checkable
class LLM(Protocol):
    """Every backend: ``hf``, ``openai``, ``llamacpp`` and the test-only ``scripted``."""

    name: str  # backend kind, e.g. "hf"
    model: str  # model name as it appears in traces and price tables

    async def generate(self, batch: list[Messages], params: SamplingParams) -> list[Completion]:
        """Complete every conversation in ``batch``; the result has the same order and length."""
        ...

    async def aclose(self) -> None: ...
