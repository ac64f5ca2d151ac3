"""A model's shape without its weights: what the dry run's memory plan (:mod:`opct.training.memory_plan`) reads.

:func:`read_shape` finds a model's ``config.json`` where it already is on this machine (a local folder, a
run's ``final/``, or the Hugging Face cache), never on the network: a dry run must answer at once and
offline. A hub id that is not in the cache falls back on :data:`KNOWN_SHAPES`, the public ``config.json``
values of the recipe models (``configs/``), their smaller relatives and the
Qwen2.5-1.5B of ``configs/qwen_*.yaml``; any other is an error saying how to
get its ``config.json``.

:func:`shape_of` turns a transformers config into a :class:`ModelShape`; :func:`parameter_count` and
:func:`lora_parameter_count` count from it exactly what ``model.parameters()`` and PEFT would, for the
families whose layers it knows (Llama, Mistral, Qwen2, Qwen3, Gemma 2 and 3; tested against built
models in ``tests/test_memory_plan.py``). Any other decoder is counted as a Llama-like one (an estimate).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from opct.errors import OpctError, read_json

#: Families whose attention normalises queries and keys per head (a ``head_dim`` RMSNorm each).
QK_NORM_FAMILIES = frozenset({"qwen3", "gemma3", "gemma3_text"})
#: Families with four norms per decoder layer (around attention and around the MLP); others have two.
FOUR_NORM_FAMILIES = frozenset({"gemma2", "gemma3", "gemma3_text"})
#: Families whose query, key and value projections carry a bias (the output projection does not).
QKV_BIAS_FAMILIES = frozenset({"qwen2"})
#: The linear layers of one decoder layer, as PEFT names them (``lora.target_modules``).
LINEAR_NAMES = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


class ShapeUnknown(OpctError):
    """A model's shape cannot be read without the network."""


@dataclass(frozen=True)
class ModelShape:
    """What the memory plan needs of a decoder-only model (the names of transformers' ``config.json``)."""

    model_type: str
    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    tie_word_embeddings: bool
    qkv_bias: bool = False
    o_bias: bool = False
    mlp_bias: bool = False
    source: str = ""

    @property
    def qk_norm(self) -> bool:
        """Whether each attention layer has per-head query and key norms (``head_dim`` weights each)."""
        return self.model_type in QK_NORM_FAMILIES

    @property
    def norms_per_layer(self) -> int:
        """RMSNorms (``hidden_size`` weights each) per decoder layer."""
        return 4 if self.model_type in FOUR_NORM_FAMILIES else 2

    @property
    def known_family(self) -> bool:
        """Whether :func:`parameter_count` is exact for this family (tested), not a Llama-like estimate."""
        return self.model_type in {"llama", "mistral", "qwen2", "qwen3", "gemma2", "gemma3", "gemma3_text"}

    def linear_shapes(self) -> dict[str, tuple[int, int]]:
        """``(in_features, out_features)`` of each linear layer of one decoder layer, by PEFT name."""
        d, i = self.hidden_size, self.intermediate_size
        q, kv = self.num_attention_heads * self.head_dim, self.num_key_value_heads * self.head_dim
        return {"q_proj": (d, q), "k_proj": (d, kv), "v_proj": (d, kv), "o_proj": (q, d),
                "gate_proj": (d, i), "up_proj": (d, i), "down_proj": (i, d)}


def parameter_count(shape: ModelShape) -> int:
    """Every parameter of the model, as ``sum(p.numel() for p in model.parameters())`` counts them.

    ``V d`` (embeddings) ``+ L x layer + d`` (final norm) ``+ V d`` again when the output head is not tied,
    where one layer is its seven linear weights (:meth:`ModelShape.linear_shapes`: ``in x out`` each), their
    biases where the family has them (queries, keys and values: ``H hd + 2 KV hd``; output: ``d``; MLP:
    ``2 I + d``), ``norms_per_layer x d`` norm weights and, with per-head query and key norms, ``2 hd``.
    """
    per_layer = sum(i * o for i, o in shape.linear_shapes().values())
    q, kv = shape.num_attention_heads * shape.head_dim, shape.num_key_value_heads * shape.head_dim
    per_layer += (q + 2 * kv) * shape.qkv_bias + shape.hidden_size * shape.o_bias
    per_layer += (2 * shape.intermediate_size + shape.hidden_size) * shape.mlp_bias
    per_layer += shape.norms_per_layer * shape.hidden_size + 2 * shape.head_dim * shape.qk_norm
    embeddings = shape.vocab_size * shape.hidden_size
    head = 0 if shape.tie_word_embeddings else embeddings
    return embeddings + shape.num_hidden_layers * per_layer + shape.hidden_size + head


def lora_parameter_count(shape: ModelShape, rank: int, target_modules: list[str] | str) -> int:
    """The trainable parameters of a LoRA adapter of ``rank`` on ``target_modules``: ``r (in + out)`` per
    adapted linear layer (its ``A`` is ``r x in``, its ``B`` ``out x r``), times the layers. ``all-linear`` is
    every linear layer of the decoder layers (PEFT leaves the output head out)."""
    names = LINEAR_NAMES if target_modules == "all-linear" else [n for n in LINEAR_NAMES if n in target_modules]
    per_layer = sum(rank * (i + o) for n, (i, o) in shape.linear_shapes().items() if n in names)
    return shape.num_hidden_layers * per_layer


def shape_of(config: Any, source: str = "") -> ModelShape:
    """A :class:`ModelShape` from a transformers config object or a ``config.json`` dict; a multimodal
    config (Gemma 3's) gives its text model's shape."""
    values = config if isinstance(config, dict) else config.to_dict()
    if "text_config" in values and "hidden_size" not in values:
        text = dict(values["text_config"])
        text.setdefault("tie_word_embeddings", values.get("tie_word_embeddings", True))
        text.setdefault("model_type", "gemma3_text")
        values = text
    model_type = str(values.get("model_type", ""))
    heads = int(values["num_attention_heads"])
    attention_bias = bool(values.get("attention_bias", False))
    return ModelShape(
        model_type=model_type, vocab_size=int(values["vocab_size"]), hidden_size=int(values["hidden_size"]),
        intermediate_size=int(values["intermediate_size"]), num_hidden_layers=int(values["num_hidden_layers"]),
        num_attention_heads=heads, num_key_value_heads=int(values.get("num_key_value_heads") or heads),
        head_dim=int(values.get("head_dim") or values["hidden_size"] // heads),
        tie_word_embeddings=bool(values.get("tie_word_embeddings", True)),
        qkv_bias=attention_bias or model_type in QKV_BIAS_FAMILIES, o_bias=attention_bias,
        mlp_bias=bool(values.get("mlp_bias", False)), source=source,
    )


def _shape(model_type: str, vocab: int, d: int, i: int, layers: int, heads: int, kv: int, hd: int,
           tied: bool) -> dict[str, Any]:
    return {"model_type": model_type, "vocab_size": vocab, "hidden_size": d, "intermediate_size": i,
            "num_hidden_layers": layers, "num_attention_heads": heads, "num_key_value_heads": kv, "head_dim": hd,
            "tie_word_embeddings": tied}


_QWEN3_4B = _shape("qwen3", 151936, 2560, 9728, 36, 32, 8, 128, True)
#: The public ``config.json`` values of the recipe models, their relatives and configs/qwen_*.yaml's model (hub id -> shape), for a dry
#: run with no network and no cache. Gemma 3 12B's is its text model's (the vision tower is not counted).
KNOWN_SHAPES: dict[str, dict[str, Any]] = {
    "Qwen/Qwen2.5-1.5B-Instruct": _shape("qwen2", 151936, 1536, 8960, 28, 12, 2, 128, True),
    "Qwen/Qwen3-0.6B": _shape("qwen3", 151936, 1024, 3072, 28, 16, 8, 128, True),
    "Qwen/Qwen3-1.7B": _shape("qwen3", 151936, 2048, 6144, 28, 16, 8, 128, True),
    "Qwen/Qwen3-4B": _QWEN3_4B,
    "Qwen/Qwen3-4B-Instruct-2507": _QWEN3_4B,
    "Qwen/Qwen3-8B": _shape("qwen3", 151936, 4096, 12288, 36, 32, 8, 128, False),
    "meta-llama/Llama-3.1-8B": _shape("llama", 128256, 4096, 14336, 32, 32, 8, 128, False),
    "meta-llama/Llama-3.1-8B-Instruct": _shape("llama", 128256, 4096, 14336, 32, 32, 8, 128, False),
    "google/gemma-3-12b-it": _shape("gemma3_text", 262208, 3840, 15360, 48, 16, 8, 256, True),
    "google/gemma-3-12b-pt": _shape("gemma3_text", 262208, 3840, 15360, 48, 16, 8, 256, True),
    # the embedded chat model's upstream (``--model smollm2``: opct/embedded/); its converted config.json is the same
    "HuggingFaceTB/SmolLM2-135M-Instruct": _shape("llama", 49152, 576, 1536, 30, 9, 3, 64, True),
}


def _cached_config(hub_id: str, revision: str | None) -> dict[str, Any] | None:
    """The hub id's ``config.json`` from the Hugging Face cache, or None (nothing is downloaded)."""
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:  # pragma: no cover - transformers always brings it
        return None
    found = try_to_load_from_cache(hub_id, "config.json", revision=revision)
    return json.loads(Path(found).read_text(encoding="utf-8")) if isinstance(found, str) else None


def read_shape(name_or_path: str, revision: str | None = None) -> ModelShape:
    """The shape of ``name_or_path`` (a folder with ``config.json``, a run directory or its ``final/``, or a
    hub id), read without loading weights or using the network; see the module docstring for the order."""
    for folder in (Path(name_or_path), Path(name_or_path) / "final"):
        if (folder / "config.json").is_file():
            config = read_json(folder / "config.json", "restore the model folder's config.json (copy or save the model again)")
            return shape_of(config, str(folder / "config.json"))
    if "/" in name_or_path and not Path(name_or_path).exists():
        cached = _cached_config(name_or_path, revision)
        if cached is not None:
            return shape_of(cached, f"{name_or_path} (Hugging Face cache)")
        if name_or_path in KNOWN_SHAPES:
            return shape_of(KNOWN_SHAPES[name_or_path], f"{name_or_path} (opct's table of public configs)")
    raise ShapeUnknown(
        f"model.name_or_path {name_or_path!r}: no config.json here, in the Hugging Face cache or in opct's table "
        f"of known shapes ({', '.join(KNOWN_SHAPES)}); the dry run never uses the network: pass a local folder "
        "with the model's config.json (e.g. `hf download ID config.json --local-dir DIR`, then --set "
        "model.name_or_path=DIR)"
    )
