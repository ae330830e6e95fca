"""A tiny random Llama model and a real byte-level BPE tokenizer, built in code in well under
a second. For tests and benchmarks of mechanics (batching, servers, trainers): it produces
gibberish, but through exactly the code paths a real checkpoint uses.
"""

from __future__ import annotations

from typing import Any

CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
SPECIAL = ["<pad>", "<|im_start|>", "<|im_end|>"]

# A few sentences so the BPE merges cover common English fragments and marag's tags.
_TRAINING_TEXT = [
    "What is the capital of France? <answer>Paris</answer>",
    "Who wrote Hamlet? The answer is William Shakespeare.",
    "<workflow>R, DS, AG</workflow> <query>heritage of Fred Astaire</query>",
    "<q1>first sub-question</q1><q2>second sub-question</q2> <id>0, 2</id>",
    "Document0: The Eiffel Tower is in Paris. Document1: Mount Everest is in Nepal.",
    "system user assistant question answer documents evidence search summary",
    "0 1 2 3 4 5 6 7 8 9 , . ; : ! ? ' \" ( ) [ ] - the a an of in on to and is was",
]


def build_tiny_tokenizer(vocab_size: int = 400) -> Any:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    raw = Tokenizer(models.BPE())
    raw.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    raw.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIAL,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    raw.train_from_iterator(_TRAINING_TEXT * 4, trainer=trainer)
    tok = PreTrainedTokenizerFast(tokenizer_object=raw, pad_token="<pad>",
                                  eos_token="<|im_end|>", bos_token="<|im_start|>")
    tok.chat_template = CHAT_TEMPLATE
    return tok


def build_tiny_model(seed: int = 0, *, hidden: int = 32, layers: int = 2,
                     tokenizer: Any = None) -> tuple[Any, Any]:
    """``(model, tokenizer)``: a randomly initialised LlamaForCausalLM sized to the tokenizer."""
    import torch
    from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM

    tok = tokenizer if tokenizer is not None else build_tiny_tokenizer()
    config = LlamaConfig(
        vocab_size=len(tok), hidden_size=hidden, intermediate_size=hidden * 2,
        num_hidden_layers=layers, num_attention_heads=4, num_key_value_heads=2,
        max_position_embeddings=512, pad_token_id=tok.pad_token_id,
        eos_token_id=tok.eos_token_id, bos_token_id=tok.bos_token_id,
        # a wide init makes the output distribution peaked, so greedy choices are not
        # decided by float rounding
        initializer_range=0.3, tie_word_embeddings=False,
    )
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config)
    model.generation_config = GenerationConfig(eos_token_id=tok.eos_token_id,
                                               pad_token_id=tok.pad_token_id)
    model.eval()
    return model, tok
