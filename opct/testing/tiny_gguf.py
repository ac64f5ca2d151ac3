"""A tiny chat model written as a GGUF file, laid out as llama.cpp lays out a Llama: for the conversion's tests.

:func:`write_tiny_gguf` builds a random 2-layer ``LlamaForCausalLM`` (64 wide, grouped-query attention) with a
byte-level BPE vocabulary and a ChatML template (as SmolLM2's), and writes it with the ``gguf`` package's
writer: llama.cpp's tensor names, its row order for the query and key projections (the rotary halves
interleaved per head, which transformers undoes on loading), and the tokenizer as ``tokenizer.ggml.*`` arrays.
A conversion is right when the converted folder gives the written model's logits.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from opct.errors import require_extra

#: ChatML, as SmolLM2-Instruct's template renders it (a default system turn when none is given).
CHATML = ("{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
          "{{ '<|im_start|>system\nYou are a tiny test model.<|im_end|>\n' }}{% endif %}"
          "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}{% endfor %}"
          "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")
SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
ROPE_THETA = 10000.0
MERGES = ("Ġ t", "h e", "Ġt he", "i n", "Ġ a", "e r", "o n", "Ġ s")


def byte_level_alphabet() -> list[str]:
    """The 256 one-character strings that byte-level BPE (GPT-2's) writes bytes as: printable bytes as
    themselves, the others shifted above U+0100, in byte order."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    shifted, chars = 0, {}
    for byte in range(256):
        if byte in printable:
            chars[byte] = chr(byte)
        else:
            chars[byte] = chr(256 + shifted)
            shifted += 1
    return [chars[b] for b in range(256)]


def vocabulary() -> list[str]:
    """The special tokens, then the 256 byte characters, then one token per merge."""
    return [*SPECIAL_TOKENS, *byte_level_alphabet(), *(m.replace(" ", "") for m in MERGES)]


def _interleave_rotary_halves(weight: Any, heads: int) -> Any:
    """llama.cpp's row order for a query or key projection: within each head, the rows of the rotary pair's
    two halves alternate (HF keeps the halves apart). ``weight``: ``[heads * head_dim, hidden]``."""
    rows, cols = weight.shape
    return weight.reshape(heads, 2, rows // heads // 2, cols).swapaxes(1, 2).reshape(rows, cols)


def write_tiny_gguf(path: Path, seed: int = 0) -> Any:
    """Write the tiny model to ``path`` (a ``.gguf`` file) and return it (the ``LlamaForCausalLM``, float32,
    eval mode) so that a test can compare a conversion against it."""
    gguf = require_extra("gguf", "gguf", "writing a GGUF file")
    import torch  # deferred: loads torch and transformers only when a test writes the file
    from transformers import LlamaConfig, LlamaForCausalLM

    tokens = vocabulary()
    config = LlamaConfig(vocab_size=len(tokens), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=256,
                         rms_norm_eps=1e-5, rope_parameters={"rope_type": "default", "rope_theta": ROPE_THETA}, tie_word_embeddings=True, bos_token_id=1,
                         eos_token_id=2, pad_token_id=2)
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config).eval()
    with torch.no_grad():
        for name, param in model.named_parameters():
            if name.endswith("norm.weight"):
                param.uniform_(0.5, 1.5)  # not all ones, so that a norm read from the wrong tensor shows
    path.parent.mkdir(parents=True, exist_ok=True)
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_name("opct tiny chat model")
    writer.add_context_length(config.max_position_embeddings)
    writer.add_block_count(config.num_hidden_layers)
    writer.add_embedding_length(config.hidden_size)
    writer.add_feed_forward_length(config.intermediate_size)
    writer.add_head_count(config.num_attention_heads)
    writer.add_head_count_kv(config.num_key_value_heads)
    writer.add_rope_dimension_count(config.head_dim)
    writer.add_rope_freq_base(ROPE_THETA)
    writer.add_layer_norm_rms_eps(config.rms_norm_eps)
    writer.add_vocab_size(config.vocab_size)
    writer.add_tokenizer_model("gpt2")
    writer.add_token_list(tokens)
    writer.add_token_types([3] * len(SPECIAL_TOKENS) + [1] * (len(tokens) - len(SPECIAL_TOKENS)))  # 3: control
    writer.add_token_merges(list(MERGES))
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.add_unk_token_id(0)
    writer.add_pad_token_id(2)
    writer.add_add_bos_token(False)
    writer.add_chat_template(CHATML)
    state = {k: v.detach().numpy() for k, v in model.state_dict().items()}
    writer.add_tensor("token_embd.weight", state["model.embed_tokens.weight"])
    writer.add_tensor("output_norm.weight", state["model.norm.weight"])
    names = {"input_layernorm": "attn_norm", "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k",
             "self_attn.v_proj": "attn_v", "self_attn.o_proj": "attn_output", "post_attention_layernorm": "ffn_norm",
             "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up", "mlp.down_proj": "ffn_down"}
    for layer in range(config.num_hidden_layers):
        for hf, ours in names.items():
            weight = state[f"model.layers.{layer}.{hf}.weight"]
            if ours == "attn_q":
                weight = _interleave_rotary_halves(weight, config.num_attention_heads)
            elif ours == "attn_k":
                weight = _interleave_rotary_halves(weight, config.num_key_value_heads)
            writer.add_tensor(f"blk.{layer}.{ours}.weight", weight)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return model
