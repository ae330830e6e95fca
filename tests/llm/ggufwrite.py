"""A float32 llama GGUF written from a transformers model, for tests that need a real GGUF."""

import json

import numpy as np


def _permute(w: np.ndarray, n_head: int) -> np.ndarray:
    # llama.cpp stores q/k rows interleaved for its rotary layout; transformers undoes it on load
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(
        w.shape)


def write_gguf(model, tok, path) -> None:
    """Write a float32 llama GGUF (weights + gpt2-style BPE tokenizer + chat template)."""
    import gguf

    c = model.config
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_block_count(c.num_hidden_layers)
    w.add_context_length(c.max_position_embeddings)
    w.add_embedding_length(c.hidden_size)
    w.add_feed_forward_length(c.intermediate_size)
    w.add_head_count(c.num_attention_heads)
    w.add_head_count_kv(c.num_key_value_heads)
    w.add_layer_norm_rms_eps(c.rms_norm_eps)
    w.add_vocab_size(c.vocab_size)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("default")
    w.add_token_list(tok.convert_ids_to_tokens(list(range(len(tok)))))
    special = set(tok.all_special_ids)
    w.add_token_types([3 if i in special else 1 for i in range(len(tok))])
    merges = json.loads(tok.backend_tokenizer.to_str())["model"]["merges"]
    w.add_token_merges([m if isinstance(m, str) else " ".join(m) for m in merges])
    w.add_bos_token_id(tok.bos_token_id)
    w.add_eos_token_id(tok.eos_token_id)
    w.add_pad_token_id(tok.pad_token_id)
    w.add_chat_template(tok.chat_template)
    names = {"input_layernorm": "attn_norm", "post_attention_layernorm": "ffn_norm",
             "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k",
             "self_attn.v_proj": "attn_v", "self_attn.o_proj": "attn_output",
             "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up", "mlp.down_proj": "ffn_down"}
    top = {"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight":
           "output_norm.weight", "lm_head.weight": "output.weight"}
    for key, value in model.state_dict().items():
        a = value.detach().float().numpy()
        if key in top:
            name = top[key]
        else:
            _, _, layer, rest = key.split(".", 3)
            part = rest.rsplit(".", 1)[0]
            name = f"blk.{layer}.{names[part]}.weight"
            if part == "self_attn.q_proj":
                a = _permute(a, c.num_attention_heads)
            elif part == "self_attn.k_proj":
                a = _permute(a, c.num_key_value_heads)
        w.add_tensor(name, np.ascontiguousarray(a))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
