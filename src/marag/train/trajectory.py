"""A multi-turn trajectory as one training sequence, its observations masked out of the loss.

Search-R1's model writes one growing text: a turn, the search results (or a correction)
appended by the environment, the next turn, and so on. Each call of the role continues the
text of the one before (``Step.messages[-1]`` is the open assistant turn). Trained as one
sequence, the prompt is the first call's prompt, the response is everything after it (the
earlier turns and the observations between them, as the last call saw them, then the last
call's own tokens) and ``loss_mask`` is 1 on the tokens the model wrote, 0 on the
observations: they get no gradient, count in no loss mean, and are no time step of GAE.

The earlier turns enter as the last call's prompt tokenised them (Search-R1's code also
decodes each turn and tokenises the joined text again). A token that straddles a turn and an
observation is masked. Where the pieces cannot be lined up (a slow tokenizer without offsets,
a template that re-renders earlier text), :func:`merge` returns None and the caller trains
the calls as separate steps, which gives the same tokens the same gradient at more cost.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from itertools import pairwise
from typing import Any

from marag.train.experience import Transition
from marag.types import Step, Trace

log = logging.getLogger(__name__)


def written_spans(steps: Sequence[Step]) -> list[tuple[int, int]] | None:
    """Character spans, in the last call's open assistant text, of what the model wrote in
    every call before the last one; None when the calls do not continue one text."""
    spans: list[tuple[int, int]] = []
    for prev, nxt in pairwise(steps):
        before = _open_text(prev)
        after = _open_text(nxt)
        if before is None or after is None or not after.startswith(before + prev.raw):
            return None
        spans.append((len(before), len(before) + len(prev.raw)))
    return spans


def _open_text(step: Step) -> str | None:
    """The assistant text a call continued ("" for a call that opened the turn)."""
    if not step.messages:
        return None
    last = step.messages[-1]
    if last.get("role") != "assistant":
        return ""
    content = last.get("content")
    return content if isinstance(content, str) else None


def observation_mask(offsets: Sequence[tuple[int, int]], spans: Sequence[tuple[int, int]]
                     ) -> list[int]:
    """1 for a token whose characters lie inside one written span, else 0 (observations,
    and tokens that straddle a turn and an observation)."""
    out = []
    for a, b in offsets:
        out.append(int(any(s <= a and b <= e and a < b for s, e in spans)))
    return out


def merge(steps: Sequence[Step], parts: Sequence[Transition], tokenizer: Any
          ) -> Transition | None:
    """One transition for ``parts`` (the per-call transitions of ``steps``, in order), or
    None when the calls cannot be lined up as one sequence."""
    if len(parts) == 1:
        return parts[0]
    first, last = parts[0], parts[-1]
    head = first.prompt_ids
    full = last.prompt_ids
    if full[:len(head)] != head:
        return _refuse("the last call's prompt does not begin with the first call's")
    spans = written_spans(steps)
    text = _open_text(steps[-1])
    if spans is None or text is None:
        return _refuse("the calls do not continue one assistant text")
    if not getattr(tokenizer, "is_fast", False):
        return _refuse("the tokenizer gives no character offsets (not a fast tokenizer)")
    enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    tail = full[len(head):]
    if list(enc["input_ids"]) != tail:
        return _refuse("the open assistant text tokenises differently inside the template")
    mask = observation_mask(enc["offset_mapping"], spans) + [1] * len(last.response_ids)
    unknown = [math.nan] * len(tail)  # the rollout's own logprobs of re-tokenised turns
    return Transition(
        trace=first.trace, group=first.group, order=first.order, role=first.role,
        prompt_ids=list(head), response_ids=list(tail) + list(last.response_ids),
        rollout_logprobs=unknown + list(last.rollout_logprobs),
        temperature=last.temperature, allowed_text=last.allowed_text,
        reward=sum(p.reward for p in parts), loss_mask=mask, step=last.step,
    )


def merge_trajectories(traces: Sequence[Trace], transitions: Sequence[Transition],
                       tokenizer: Any) -> list[Transition]:
    """``transitions`` (from :func:`~marag.train.experience.collect`) with each trace's
    trained calls of one role merged into one sequence where they line up (:func:`merge`);
    the order of the rest is kept."""
    groups: dict[tuple[int, str], list[Transition]] = {}
    for t in transitions:
        groups.setdefault((t.trace, t.role), []).append(t)
    merged: dict[int, Transition] = {}  # id of a group's first part -> its merged transition
    dropped: set[int] = set()
    for (ti, _), parts in groups.items():
        if len(parts) < 2:
            continue
        steps = [traces[ti].steps[p.step] for p in parts]
        one = merge(steps, parts, tokenizer)
        if one is not None:
            merged[id(parts[0])] = one
            dropped.update(id(p) for p in parts[1:])
    out = []
    for t in transitions:
        if id(t) in dropped:
            continue
        out.append(merged.get(id(t), t))
    return _renumber(out)


def _renumber(items: list[Transition]) -> list[Transition]:
    """Each trace's transitions numbered 0, 1, ... again after merging."""
    seen: dict[int, int] = {}
    for t in items:
        t.order = seen.get(t.trace, 0)
        seen[t.trace] = t.order + 1
    return items


_warned: set[str] = set()


def _refuse(why: str) -> None:
    """Log once per reason that a trajectory is trained as separate calls; None to return."""
    if why not in _warned:
        _warned.add(why)
        log.warning("trajectory trained as separate calls: %s", why)
