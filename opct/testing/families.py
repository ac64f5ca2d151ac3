"""Tiny random-init models of real transformers families, for the family matrix (``tests/test_family_matrix.py``).

Each entry of :data:`FAMILIES` is a transformers config class and the keyword arguments that make it
tiny (hidden size 64, 2 layers) while keeping what is particular to the family: sliding windows
(shorter than a chat prompt, so that they matter), logit soft-capping, fused projections, ALiBi,
hand-written attention. :func:`make_config_model` builds one with a real tokenizer and saves both.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

#: Sizes every family shares (named as most configs name them; the others are mapped per family).
_SMALL = {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 128}
_GQA = {**_SMALL, "num_key_value_heads": 2}

#: family -> (config class name in ``transformers``, keyword arguments on top of the vocabulary and special ids).
FAMILIES: dict[str, tuple[str, dict[str, Any]]] = {
    "llama": ("LlamaConfig", _GQA),
    "qwen3": ("Qwen3Config", {**_GQA, "head_dim": 16}),
    "gpt2": ("GPT2Config", {"n_embd": 64, "n_layer": 2, "n_head": 4, "n_positions": 1024}),
    "mistral": ("MistralConfig", {**_GQA, "sliding_window": 16}),
    "gemma2": ("Gemma2Config", {**_GQA, "head_dim": 16, "sliding_window": 16}),
    "gemma3": ("Gemma3TextConfig", {**_GQA, "head_dim": 16, "sliding_window": 16,
                                    "layer_types": ["sliding_attention", "full_attention"]}),
    "phi3": ("Phi3Config", _GQA),
    "olmo2": ("Olmo2Config", _GQA),
    "qwen2": ("Qwen2Config", {**_GQA, "use_sliding_window": True, "sliding_window": 16, "max_window_layers": 1}),
    "gpt_neox": ("GPTNeoXConfig", _SMALL),
    "falcon": ("FalconConfig", {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
                                "new_decoder_architecture": True, "num_kv_heads": 2, "alibi": False}),
    "stablelm": ("StableLmConfig", _GQA),
    "bloom": ("BloomConfig", {"hidden_size": 64, "n_layer": 2, "n_head": 4}),
}

#: Logit scales other than :func:`make_config_model`'s default: Bloom's residual stream carries its input
#: embedding normalised, so its tied output layer favours the input token, more so the sharper it is made.
SHARPEN = {"bloom": 8.0}

#: Families whose layers attend through a sliding window (of 16 positions here).
SLIDING_WINDOW_FAMILIES = ("mistral", "gemma2", "gemma3", "qwen2")


def family_config(family: str, tokenizer: Any) -> Any:
    """The tiny config of ``family`` (a key of :data:`FAMILIES`) for ``tokenizer``'s vocabulary and special tokens."""
    import transformers

    class_name, kwargs = FAMILIES[family]
    eos = tokenizer.eos_token_id
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else eos
    return getattr(transformers, class_name)(
        vocab_size=len(tokenizer), bos_token_id=eos, eos_token_id=eos, pad_token_id=pad, **kwargs
    )


def make_config_model(family: str, tokenizer: Any, out_dir: str | Path, seed: int = 0, sharpen: float | None = None) -> Path:
    """Save a tiny random ``family`` model with ``tokenizer`` (loaded, or a folder holding one) to ``out_dir``;
    return ``out_dir``.

    ``sharpen`` (default: the family's :data:`SHARPEN`, else 16) scales the logits so that next-token distributions are not near-uniform (random weights give
    near-uniform ones, under which a wrong log-prob hides): the output layer's weight, or, where it is the
    input embedding (tied), the final normalisation's output (scaling the shared embedding would also scale
    the inputs, and the model would only repeat its input token)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    if isinstance(tokenizer, str | Path):
        tokenizer = AutoTokenizer.from_pretrained(tokenizer)
    tokenizer.save_pretrained(out)
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(family_config(family, tokenizer))
    sharpen = sharpen or SHARPEN.get(family, 16.0)
    with torch.no_grad():
        if model.get_output_embeddings().weight is model.get_input_embeddings().weight:
            _scale_final_norm(model, sharpen)
        else:
            model.get_output_embeddings().weight.mul_(sharpen)
    model.save_pretrained(out)
    return out


def _scale_final_norm(model: torch.nn.Module, scale: float) -> None:
    """Multiply the output of ``model``'s last normalisation layer (the one before the output layer) by ``scale``."""
    norm = [m for m in model.modules() if "norm" in type(m).__name__.lower() and getattr(m, "weight", None) is not None][-1]
    if bool((norm.weight == 0).all()):  # Gemma's RMSNorm multiplies by (1 + weight), initialised at 0
        norm.weight.add_(scale - 1.0)
    else:
        norm.weight.mul_(scale)
    if getattr(norm, "bias", None) is not None:
        norm.bias.mul_(scale)
