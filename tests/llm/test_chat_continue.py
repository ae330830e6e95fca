"""A conversation that ends in an open assistant turn is continued."""

from __future__ import annotations


def test_render_chat_continues_an_open_assistant_turn(tiny):
    from marag.llm.chat import prompt_ids, render_chat

    _, tok = tiny
    user = [{"role": "user", "content": "hi"}]
    opened = [*user, {"role": "assistant", "content": "<answer>"}]
    text = render_chat(tok, opened)
    assert text.endswith("<answer>")
    # the open turn is the closed conversation's generation prompt plus the prefix
    assert text == render_chat(tok, user) + "<answer>"
    assert prompt_ids(tok, opened)[:len(prompt_ids(tok, user))] == prompt_ids(tok, user)
