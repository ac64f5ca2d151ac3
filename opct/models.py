"""Load the policy and its frozen teacher; render chat prompts to token ids."""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedModel, PreTrainedTokenizerBase

from opct.config import MODEL_ALIASES, LoraConfig, ModelConfig
from opct.config.hub import require_hub
from opct.errors import OpctError
from opct.runs.errors import ModelCheckpointError as CheckpointError  # the name callers of this module know
from opct.runs.trained import (
    check_loading_info,
    check_remote_code_consent,
    checkpoint_folder,
    checkpoint_spec,
    load_adapter,
    read_checkpoint_record,
    resolve_checkpoint,
)
from opct.tokenizer_cache import LOADED_TOKENIZERS, files_signature

_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16, "auto": "auto"}


class ChatTemplateError(OpctError, ValueError):
    """The tokenizer cannot render chat messages."""


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


def _read_template(template: str) -> str:
    """A chat template given as Jinja text, or the path of a file holding it.

    Text without any Jinja tag (``{{``, ``{%``) is taken as a path; a path that does not exist is an
    error, never a template whose every prompt renders as the path itself.
    """
    if "{{" in template or "{%" in template:
        return template
    candidate = Path(template).expanduser()
    if candidate.is_file():
        return candidate.read_text(encoding="utf-8")
    raise ChatTemplateError(
        f"model.chat_template {template!r} is neither a Jinja template (no {{{{ or {{% in it) nor an existing file; "
        "check the path"
    )


def load_tokenizer(
    name_or_path: str, chat_template: str | None = None, revision: str | None = None, trust_remote_code: bool = False
) -> PreTrainedTokenizerBase:
    """Load a tokenizer; ``chat_template`` (a Jinja string or file path) replaces or supplies its template.
    The same files give the same object again until it or they change (:mod:`opct.tokenizer_cache`)."""
    path = resolve_model_path(name_or_path)
    template = _read_template(chat_template) if chat_template else None

    def load() -> PreTrainedTokenizerBase:
        tok = AutoTokenizer.from_pretrained(path, revision=revision, trust_remote_code=trust_remote_code)
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


def as_messages(prompt: list[dict[str, str]] | str) -> list[dict[str, str]]:
    """A plain string means one user message."""
    return [{"role": "user", "content": prompt}] if isinstance(prompt, str) else prompt


def render_prompt(
    tokenizer: PreTrainedTokenizerBase,
    messages: list[dict[str, str]] | str,
    **template_kwargs: Any,
) -> list[int]:
    """Render chat messages through the tokenizer's chat template, with the generation prompt, as ids."""
    if not getattr(tokenizer, "chat_template", None):
        raise ChatTemplateError(
            f"the tokenizer of {getattr(tokenizer, 'name_or_path', '?')!r} has no chat template. "
            "Pass one with model.chat_template (a Jinja string or the path of a .jinja file)."
        )
    ids = tokenizer.apply_chat_template(
        as_messages(messages), add_generation_prompt=True, tokenize=True, return_dict=False, **template_kwargs
    )
    return list(ids)


@dataclass(frozen=True)
class PromptRenderer:
    """Chat messages -> prompt token ids for one model spec: its chat template, its
    ``chat_template_kwargs`` and its system prompt. Training, eval and the attacker render through it,
    so a checkpoint is evaluated on exactly the ids it was trained on."""

    tokenizer: PreTrainedTokenizerBase
    template_kwargs: dict[str, Any]
    system_prompt: str | None = None

    @classmethod
    def for_model(cls, tokenizer: PreTrainedTokenizerBase, spec: ModelConfig) -> PromptRenderer:
        return cls(tokenizer, dict(spec.chat_template_kwargs), spec.system_prompt)

    def messages(self, prompt: list[dict[str, str]] | str) -> list[dict[str, str]]:
        """The messages as rendered: the system prompt first (merged into a leading system message)."""
        msgs = as_messages(prompt)
        if not self.system_prompt:
            return msgs
        if msgs and msgs[0]["role"] == "system":
            return [{"role": "system", "content": f"{self.system_prompt}\n\n{msgs[0]['content']}"}, *msgs[1:]]
        return [{"role": "system", "content": self.system_prompt}, *msgs]

    def __call__(self, prompt: list[dict[str, str]] | str) -> list[int]:
        return render_prompt(self.tokenizer, self.messages(prompt), **self.template_kwargs)


def eos_token_ids(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase) -> list[int]:
    """All token ids that end a response: the tokenizer's EOS and the model's generation EOS ids."""
    ids: set[int] = set()
    if tokenizer.eos_token_id is not None:
        ids.add(int(tokenizer.eos_token_id))
    gen_eos = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    if isinstance(gen_eos, int):
        ids.add(gen_eos)
    elif isinstance(gen_eos, list | tuple):
        ids.update(int(i) for i in gen_eos)
    if not ids:
        raise ValueError("neither the tokenizer nor the model defines an end-of-sequence token")
    return sorted(ids)


def load_model(cfg: ModelConfig, device: str | torch.device | None = None, strict: bool = False) -> PreTrainedModel:
    """Load a causal LM from a hub id or local path (``trust_remote_code`` only when asked).

    ``strict``: a trained checkpoint folder, whose weights must be exactly the model's tensors (a missing
    one is an error, never a tensor left at its initial value: :func:`opct.runs.trained.check_loading_info`)."""
    kwargs: dict[str, Any] = {"revision": cfg.revision, "trust_remote_code": cfg.trust_remote_code}
    kwargs["dtype"] = _DTYPES[cfg.dtype]
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


def add_lora(model: PreTrainedModel, lora: LoraConfig) -> PreTrainedModel:
    """Wrap ``model`` with a fresh LoRA adapter (PEFT); only the adapter is trainable."""
    from peft import LoraConfig as PeftLoraConfig
    from peft import get_peft_model

    peft_cfg = PeftLoraConfig(**lora.peft_kwargs(), task_type="CAUSAL_LM")
    return get_peft_model(model, peft_cfg)


def is_peft(model: torch.nn.Module) -> bool:
    return hasattr(model, "disable_adapter") and hasattr(model, "peft_config")


def weights_fingerprint(model: torch.nn.Module) -> str:
    """The first 16 hex digits of :func:`weights_sha256`: the identity runs, evals and attacks compare."""
    return weights_sha256(model)[:16]


def same_weights(recorded: str, sha256: str) -> bool:
    """Whether a recorded base-weights hash names the weights of full ``sha256``: the full hash, or the
    16-digit prefix that checkpoints written before opct recorded the full one hold."""
    return recorded == sha256 or (len(recorded) == 16 and sha256.startswith(recorded))


def weights_sha256(model: torch.nn.Module) -> str:
    """sha256 over every weight of ``model`` (names, shapes, dtypes and all bytes), tensor by tensor.

    Under LoRA it hashes the base weights only (the teacher), not the adapter. Each tensor is
    hashed in place (one device-to-host copy at a time on an accelerator), so no second copy of the
    model is ever held.
    """
    h = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        if "lora_" in name:
            continue
        h.update(f"{name}:{tuple(tensor.shape)}:{tensor.dtype}".encode())
        data = tensor.detach().contiguous()
        h.update(data.cpu().view(torch.uint8).numpy().data if data.numel() else b"")
    return h.hexdigest()


@dataclass
class Teacher:
    """The frozen run-start policy.

    Under LoRA it is the same module with the adapter disabled (no second copy of the weights);
    under full fine-tuning it is an immutable copy made before training (under FSDP each process
    keeps only its shard of it: :func:`opct.training.fsdp.shard_frozen`).
    """

    model: torch.nn.Module
    shares_weights: bool
    fingerprint: str

    @contextmanager
    def active(self) -> Iterator[torch.nn.Module]:
        """Yield a module that computes the teacher's outputs (use under ``torch.no_grad``)."""
        was_training = self.model.training
        self.model.eval()
        try:
            if self.shares_weights:
                with self.model.disable_adapter():
                    yield self.model
            else:
                yield self.model
        finally:
            self.model.train(was_training)


def make_teacher(model: torch.nn.Module, fingerprint: str | None = None) -> Teacher:
    """Build the frozen teacher for a policy about to be trained.

    ``fingerprint`` is the base weights' :func:`weights_fingerprint` taken before any adapter was
    added (computed here when not given).
    """
    if is_peft(model):
        return Teacher(model=model, shares_weights=True, fingerprint=fingerprint or weights_fingerprint(model))
    frozen = copy.deepcopy(model)
    frozen.eval()
    for p in frozen.parameters():
        p.requires_grad_(False)
    return Teacher(model=frozen, shares_weights=False, fingerprint=fingerprint or weights_fingerprint(frozen))


def default_device() -> str:
    """The first GPU when there is one, else the CPU."""
    return "cuda" if torch.cuda.is_available() else "cpu"


def inference_spec(spec: ModelConfig | str) -> ModelConfig:
    """The spec to evaluate or attack ``spec`` with.

    A trained checkpoint (a run directory or its ``final/``) fills every rendering setting the caller
    did not set (chat template, its kwargs, system prompt, dtype, the base's hub revision) from the spec
    it was trained with, so prompts become exactly the token ids training used. Never
    ``trust_remote_code``: only the caller turns remote code on (a checkpoint that needs it is refused
    at loading: :func:`opct.runs.trained.check_remote_code_consent`).
    """
    if isinstance(spec, str):
        spec = ModelConfig(name_or_path=spec)
    recorded = checkpoint_spec(spec.name_or_path)
    if recorded is None:
        return spec
    inherited = ("chat_template", "chat_template_kwargs", "system_prompt", "dtype", "attn_implementation", "revision")
    return spec.model_copy(update={k: getattr(recorded, k) for k in inherited if k not in spec.model_fields_set})


def load_spec_for_inference(spec: ModelConfig) -> tuple[PreTrainedModel, PreTrainedTokenizerBase, PromptRenderer]:
    """Load a model spec for generation (on its device, in its dtype) with the renderer of its prompts.

    ``spec`` is used as given: resolve a trained checkpoint's recorded settings first with
    :func:`inference_spec`.
    """
    model, tokenizer = load_for_inference(
        spec.name_or_path,
        dtype=spec.dtype,
        device=spec.device or default_device(),
        chat_template=spec.chat_template,
        trust_remote_code=spec.trust_remote_code,
        revision=spec.revision,
    )
    return model, tokenizer, PromptRenderer.for_model(tokenizer, spec)


def load_for_inference(
    spec: str, dtype: str = "float32", device: str | None = None, chat_template: str | None = None,
    trust_remote_code: bool = False, revision: str | None = None,
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """Load a model to generate with: a base model, or a base with its trained LoRA merged in
    (``revision``: the hub revision of the model, or of an adapter's base).

    A trained checkpoint is loaded only as what it claims (:mod:`opct.runs.trained`): remote code only
    when ``trust_remote_code`` is given here (a record asking for it is refused otherwise), exactly the
    tensors of its files (a missing or extra one is refused), and an adapter's base weights checked
    against the sha256 recorded at training, whatever ``dtype`` is asked: a changed base is refused
    (:class:`CheckpointError`).
    """
    folder = checkpoint_folder(spec)
    record = read_checkpoint_record(folder) if folder is not None else None
    if folder is not None and record is not None:
        check_remote_code_consent(folder, record, trust_remote_code)
    base, adapter = resolve_checkpoint(spec)
    base_spec = ModelConfig(name_or_path=base, dtype=dtype, trust_remote_code=trust_remote_code, revision=revision)
    expected = (record or {}).get("base_weights_sha256") if adapter else None
    trained_dtype = ((record or {}).get("model") or {}).get("dtype") or "float32"
    if expected and trained_dtype not in _DTYPES:
        raise CheckpointError(f"{adapter}: its record's model.dtype {trained_dtype!r} is not one of {', '.join(_DTYPES)}")
    if expected and trained_dtype != dtype:  # hash the base as training loaded it (the hash covers its dtype)
        _check_base_weights(load_model(base_spec.model_copy(update={"dtype": trained_dtype})), expected, adapter, base)
    full_checkpoint = folder is not None and adapter is None  # its own weights: exactly the model's tensors
    model = load_model(base_spec, device, strict=True) if full_checkpoint else load_model(base_spec, device)
    if expected and trained_dtype == dtype:
        _check_base_weights(model, expected, adapter, base)
    if adapter:
        model = load_adapter(model, adapter)
    model.eval()
    tokenizer_source = adapter if adapter and (Path(adapter) / "tokenizer_config.json").exists() else base
    return model, load_tokenizer(tokenizer_source, chat_template, revision=revision if tokenizer_source == base else None,
                                 trust_remote_code=trust_remote_code)


def _check_base_weights(model: torch.nn.Module, expected: str, adapter: str | None, base: str) -> None:
    """Refuse an adapter whose base no longer holds the weights it was trained on."""
    if not same_weights(expected, actual := weights_sha256(model)):
        raise CheckpointError(
            f"{adapter} was trained on base weights {expected}, but {base} now holds {actual}; "
            "the adapter would be applied to a different model. Restore the base model or retrain."
        )
