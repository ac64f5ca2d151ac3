"""Load a model spec or a trained checkpoint to generate with: its recorded settings, its checked base."""

from __future__ import annotations

from pathlib import Path

import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from opct.config import ModelConfig
from opct.models.chat import PromptRenderer
from opct.models.loading import TORCH_DTYPES, default_device, load_model, load_tokenizer
from opct.models.weights import same_weights, weights_sha256
from opct.runs.errors import ModelCheckpointError as CheckpointError  # the name callers of opct.models know
from opct.runs.trained import (
    check_remote_code_consent,
    checkpoint_folder,
    checkpoint_spec,
    load_adapter,
    read_checkpoint_record,
    resolve_checkpoint,
)


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
    if expected and trained_dtype not in TORCH_DTYPES:
        raise CheckpointError(f"{adapter}: its record's model.dtype {trained_dtype!r} is not one of {', '.join(TORCH_DTYPES)}")
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
