"""Load a causal LM and its tokenizer from an alias, a local folder or a hub id."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedModel, PreTrainedTokenizerBase

from opct.config import MODEL_ALIASES, ModelConfig
from opct.config.hub import require_hub
from opct.errors import OpctError, load_folder
from opct.models.chat import read_template
from opct.runs.trained import check_loading_info
from opct.tokenizer_cache import LOADED_TOKENIZERS, files_signature

TORCH_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16, "auto": "auto"}


class ModelNotFoundError(OpctError, FileNotFoundError):
    """A model given as a local path that does not exist (it is never looked up on the hub)."""


_WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".json", ".gguf", ".ckpt")


def looks_like_local_path(name: str) -> bool:
    """Whether ``name`` can only mean a local path, not a hub id (``org/name``): it starts with ``/``,
    ``.``, ``~`` or a drive letter, has more than one ``/``, a file suffix, or its first part is an
    existing local folder (``models/tiny`` when ``models/`` exists)."""
    if name.startswith(("/", ".", "~", "\\")) or (len(name) > 1 and name[1] == ":") or "\\" in name:
        return True
    if name.count("/") > 1 or name.lower().endswith(_WEIGHT_SUFFIXES):
        return True
    first = name.split("/", 1)[0]
    return "/" in name and Path(first).is_dir()


def resolve_model_path(name_or_path: str) -> str:
    """Map a registered alias (e.g. ``organism``) to its folder; an existing path or a hub id passes
    through (a hub id only when the hub answers: :func:`opct.config.hub.require_hub`); a name that can only
    be a local path (:func:`looks_like_local_path`) and does not exist is a :class:`ModelNotFoundError`."""
    if name_or_path in MODEL_ALIASES:
        return str(MODEL_ALIASES.get(name_or_path)())
    if looks_like_local_path(name_or_path) and not Path(name_or_path).expanduser().exists():
        raise ModelNotFoundError(
            f"no model at {name_or_path!r}: it is a local path (not looked up on the Hugging Face hub) and does not "
            "exist. Check the path, or give a hub id such as Qwen/Qwen2.5-1.5B-Instruct."
        )
    require_hub(name_or_path)  # a hub id: a dead network fails now, not after a minute of retries
    return name_or_path



#: What to do about a local tokenizer folder with a damaged file.
TOKENIZER_REMEDY = "restore the file (copy the folder again, or opct model tiny / save_pretrained it again)"


def load_tokenizer(
    name_or_path: str, chat_template: str | None = None, revision: str | None = None, trust_remote_code: bool = False
) -> PreTrainedTokenizerBase:
    """Load a tokenizer; ``chat_template`` (a Jinja string or file path) replaces or supplies its template.
    The same files give the same object again until it or they change (:mod:`opct.tokenizer_cache`)."""
    path = resolve_model_path(name_or_path)
    template = read_template(chat_template) if chat_template else None

    def load() -> PreTrainedTokenizerBase:
        tok = load_folder(path, "the tokenizer", TOKENIZER_REMEDY,  # a damaged file: named, not a bare JSON error
                          lambda: AutoTokenizer.from_pretrained(path, revision=revision, trust_remote_code=trust_remote_code))
        if template:
            tok.chat_template = template
        if tok.pad_token_id is None:
            tok.pad_token = tok.eos_token
        return tok

    key = (path, files_signature(path), template, revision, trust_remote_code)
    return LOADED_TOKENIZERS.get(key, load)


def model_context(name_or_path: str) -> int | None:
    """The context length of a model folder or hub id (its config's position limit), or None if unknown."""
    from transformers import AutoConfig

    try:
        cfg = AutoConfig.from_pretrained(resolve_model_path(name_or_path))
    except (OSError, ValueError):
        return None
    for key in ("max_position_embeddings", "n_positions", "max_sequence_length", "seq_length"):
        value = getattr(cfg, key, None)
        if isinstance(value, int) and value > 0:
            return value
    return None



def load_model(cfg: ModelConfig, device: str | torch.device | None = None, strict: bool = False) -> PreTrainedModel:
    """Load a causal LM from a hub id or local path (``trust_remote_code`` only when asked).

    ``strict``: a trained checkpoint folder, whose weights must be exactly the model's tensors (a missing
    one is an error, never a tensor left at its initial value: :func:`opct.runs.trained.check_loading_info`)."""
    kwargs: dict[str, Any] = {"revision": cfg.revision, "trust_remote_code": cfg.trust_remote_code}
    kwargs["dtype"] = TORCH_DTYPES[cfg.dtype]
    if cfg.attn_implementation:
        kwargs["attn_implementation"] = cfg.attn_implementation
    path = resolve_model_path(cfg.name_or_path)
    if strict:
        model, info = AutoModelForCausalLM.from_pretrained(path, output_loading_info=True, **kwargs)
        check_loading_info(info, path)
    else:
        model = AutoModelForCausalLM.from_pretrained(path, **kwargs)
    if device is not None:
        model.to(device)
    return model


def disable_dropout(model: torch.nn.Module) -> int:
    """Set every dropout of ``model`` to 0 (``nn.Dropout`` modules and float ``*dropout`` attributes
    of attention layers); returns how many were non-zero.

    On-policy training needs the student's forward to compute the policy that sampled: with dropout
    active the importance ratio departs from 1 at the first step (GPT-2 ships dropout 0.1).
    """
    changed = 0
    for module in model.modules():
        if isinstance(module, torch.nn.Dropout) and module.p > 0:
            module.p, changed = 0.0, changed + 1
        for attr in ("attention_dropout", "dropout"):
            value = getattr(module, attr, None)
            if isinstance(value, float) and value > 0:
                setattr(module, attr, 0.0)
                changed += 1
    return changed



def default_device() -> str:
    """The first GPU when there is one, else the CPU."""
    return "cuda" if torch.cuda.is_available() else "cpu"

