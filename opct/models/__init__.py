"""Load the policy and its frozen teacher; render chat prompts to token ids.

One idea per module: loading a model and its tokenizer (:mod:`opct.models.loading`), chat templates and the
ids they render (:mod:`opct.models.chat`), a policy's weights, its LoRA adapter and their identity
(:mod:`opct.models.weights`), the frozen teacher (:mod:`opct.models.teacher`), and a model spec or trained
checkpoint loaded to generate with (:mod:`opct.models.inference`). Their public names are importable from here.
"""

from opct.models.chat import ChatTemplateError, PromptRenderer, as_messages, eos_token_ids, render_prompt
from opct.models.inference import (
    CheckpointError,
    checkpoint_folder,
    checkpoint_spec,
    inference_spec,
    load_for_inference,
    load_spec_for_inference,
    read_checkpoint_record,
)
from opct.models.loading import (
    ModelNotFoundError,
    default_device,
    disable_dropout,
    load_model,
    load_tokenizer,
    looks_like_local_path,
    model_context,
    resolve_model_path,
)
from opct.models.teacher import Teacher, make_teacher
from opct.models.weights import add_lora, is_peft, same_weights, weights_fingerprint, weights_sha256

__all__ = [
    "ChatTemplateError",
    "CheckpointError",
    "ModelNotFoundError",
    "PromptRenderer",
    "Teacher",
    "add_lora",
    "as_messages",
    "checkpoint_folder",
    "checkpoint_spec",
    "default_device",
    "disable_dropout",
    "eos_token_ids",
    "inference_spec",
    "is_peft",
    "load_for_inference",
    "load_model",
    "load_spec_for_inference",
    "load_tokenizer",
    "looks_like_local_path",
    "make_teacher",
    "model_context",
    "read_checkpoint_record",
    "render_prompt",
    "resolve_model_path",
    "same_weights",
    "weights_fingerprint",
    "weights_sha256",
]
