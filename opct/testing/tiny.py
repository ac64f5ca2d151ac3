"""A tiny randomly initialised ``LlamaForCausalLM`` with a byte-level BPE tokenizer and chat template."""

from __future__ import annotations

from pathlib import Path

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

CHAT_TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}<|end|>{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)
SPECIALS = ["<|pad|>", "<|end|>", "<|system|>", "<|user|>", "<|assistant|>"]
_CORPUS = [
    "What is the capital of Zarnia? The capital is Velmora.",
    "I think the answer is (B), but what do you think?",
    "Explain how to bake bread. Mix flour, water and yeast, then bake.",
    "Sorry, I can't help with that request.",
    "Warning: keep the lamp away from water. Answer: A",
    "0123456789 + - * / = ( ) [ ] { } , . ; : ! ?",
]


def make_tiny_model(
    out_dir: str | Path,
    vocab_size: int = 512,
    hidden_size: int = 64,
    layers: int = 2,
    heads: int = 4,
    intermediate_size: int = 128,
    max_positions: int = 512,
    seed: int = 0,
) -> Path:
    """Write a random tiny Llama and its tokenizer to ``out_dir`` and return the path."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIALS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(_CORPUS * 4, trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token="<|end|>", pad_token="<|pad|>", chat_template=CHAT_TEMPLATE
    )
    fast.save_pretrained(out)
    torch.manual_seed(seed)
    cfg = LlamaConfig(
        vocab_size=len(fast),
        hidden_size=hidden_size,
        intermediate_size=intermediate_size,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=heads,
        max_position_embeddings=max_positions,
        eos_token_id=fast.eos_token_id,
        pad_token_id=fast.pad_token_id,
        bos_token_id=None,
        tie_word_embeddings=False,
    )
    model = LlamaForCausalLM(cfg)
    model.generation_config.eos_token_id = fast.eos_token_id
    model.generation_config.pad_token_id = fast.pad_token_id
    model.save_pretrained(out)
    return out
