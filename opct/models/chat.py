"""Chat messages to prompt token ids (a model's chat template, its kwargs, its system prompt) and the ids that end a response."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from transformers import PreTrainedModel, PreTrainedTokenizerBase

from opct.config import ModelConfig
from opct.errors import OpctError, read_text


class ChatTemplateError(OpctError, ValueError):
    """The tokenizer cannot render chat messages."""



def read_template(template: str) -> str:
    """A chat template given as Jinja text, or the path of a file holding it.

    Text without any Jinja tag (``{{``, ``{%``) is taken as a path; a path that does not exist is an
    error, never a template whose every prompt renders as the path itself.
    """
    if "{{" in template or "{%" in template:
        return template
    candidate = Path(template).expanduser()
    if candidate.is_file():
        return read_text(candidate)
    raise ChatTemplateError(
        f"model.chat_template {template!r} is neither a Jinja template (no {{{{ or {{% in it) nor an existing file; "
        "check the path"
    )



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

