"""How a chat conversation becomes prompt tokens for a local model.

One definition shared by the ``hf`` backend (rollouts, inference) and the trainer (SFT
targets, recomputed logprobs), so prompt tokens cannot drift between sampling and update.
"""

from __future__ import annotations

import logging
from typing import Any

log = logging.getLogger(__name__)

Messages = list[dict[str, str]]
_warned: set[int] = set()


# the fewest leading prompt tokens worth a prefix-cache entry, or starting a prompt from one
MIN_PREFIX = 16


def render_chat(tokenizer: Any, messages: Messages, generation_prompt: bool = True) -> str:
    """The conversation as text: the tokenizer's chat template, or a plain ``role: content``
    layout (ending in ``assistant:``) for a tokenizer without one.

    A conversation that ends in an assistant turn is continued: that turn stays open (no
    end-of-turn token) and the model writes on from its text (a role's ``reply_prefix``)."""
    cont = bool(messages) and messages[-1].get("role") == "assistant"
    if getattr(tokenizer, "chat_template", None):
        if cont:
            return tokenizer.apply_chat_template(messages, add_generation_prompt=False,
                                                 continue_final_message=True, tokenize=False)
        return tokenizer.apply_chat_template(messages, add_generation_prompt=generation_prompt,
                                             tokenize=False)
    if id(tokenizer) not in _warned:
        log.warning("tokenizer %s has no chat template; using a plain 'role: content' layout",
                    getattr(tokenizer, "name_or_path", "?"))
        _warned.add(id(tokenizer))
    if cont:
        head = "".join(f"{m['role']}: {m['content']}\n" for m in messages[:-1])
        return f"{head}assistant:{messages[-1]['content']}"
    text = "".join(f"{m['role']}: {m['content']}\n" for m in messages)
    return text + "assistant:" if generation_prompt else text


def text_ids(tokenizer: Any, text: str) -> list[int]:
    """Token ids of already-rendered text (the template supplies special tokens itself)."""
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


def prompt_ids(tokenizer: Any, messages: Messages) -> list[int]:
    """The prompt token ids for one conversation (chat template + generation prompt)."""
    return text_ids(tokenizer, render_chat(tokenizer, messages, True))


def eos_ids(model: Any, tokenizer: Any) -> set[int]:
    """Every token that ends a completion: the generation config's and the tokenizer's EOS."""
    eos: set[int] = set()
    gen_eos = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    for e in gen_eos if isinstance(gen_eos, list) else [gen_eos]:
        if e is not None:
            eos.add(int(e))
    if tokenizer.eos_token_id is not None:
        eos.add(int(tokenizer.eos_token_id))
    return eos


def turn_end_id(tokenizer: Any, eos: set[int]) -> int:
    """The token the chat template closes an assistant turn with (Qwen's ``<|im_end|>``, not
    its ``<|endoftext|>``): the first token after a rendered reply, when it is one of ``eos``;
    else the tokenizer's EOS, else the smallest of ``eos``."""
    marker = "MARAGREPLYEND"
    if getattr(tokenizer, "chat_template", None):
        text = tokenizer.apply_chat_template(
            [{"role": "user", "content": "hi"}, {"role": "assistant", "content": marker}],
            tokenize=False)
        after = text[text.rfind(marker) + len(marker):]
        ids = text_ids(tokenizer, after)
        if ids and ids[0] in eos:
            return ids[0]
    if tokenizer.eos_token_id is not None and int(tokenizer.eos_token_id) in eos:
        return int(tokenizer.eos_token_id)
    return min(eos)


def allowed_token_ids(tokenizer: Any, texts: tuple[str, ...], eos: set[int]) -> list[int]:
    """The tokens a decoder restricted to ``texts`` may pick: theirs, plus EOS to stop."""
    ids = {t for text in texts for t in text_ids(tokenizer, text)}
    return sorted(ids | eos)
