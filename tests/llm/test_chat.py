"""Chat rendering helpers (marag.llm.chat)."""


def test_the_turn_end_is_the_templates_not_the_smallest_eos():
    """Qwen2.5 has EOS ids 151643 (<|endoftext|>) and 151645 (<|im_end|>); its template closes
    a reply with <|im_end|>. The tiny tokenizer renders the same ChatML layout."""
    from marag.llm.chat import turn_end_id
    from marag.llm.tiny import build_tiny_tokenizer

    tok = build_tiny_tokenizer()
    im_end = tok.convert_tokens_to_ids("<|im_end|>")
    pad = tok.convert_tokens_to_ids("<pad>")
    assert pad < im_end
    assert turn_end_id(tok, {pad, im_end}) == im_end
