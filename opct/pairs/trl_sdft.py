"""TRL's self-distillation data (``prompt`` + ``privileged_context``): its ``teacher_prompt`` built as TRL builds it.

A row of TRL's ``SDFTTrainer`` (``trl.experimental.sdft``) has no teacher prompt: the trainer makes one from
the student's ``prompt`` and the row's ``privileged_context`` with ``SDFTConfig.teacher_prompt_template``. opct
reads such a row as a pair whose ``teacher_prompt`` is the one TRL would build with its default template, so
a TRL data set trains unchanged.

What is matched (read in huggingface/trl, ``trl/experimental/sdft/sdft_trainer.py``, the context builder's
teacher-prompt composition and its privileged-context and last-user-turn helpers, and ``sdft_config.py``'s
``teacher_prompt_template``, at commit f2cd577, VERSION 1.10.0.dev0):

* the template is ``"{prompt}\\n\\n{privileged_context}"`` (TRL's default), filled by :meth:`str.format`, so
  braces inside the prompt or the context are kept as they are;
* a privileged context that is a string is used as it is; a list of messages becomes the text of each
  message's content (a content-part list: its ``text`` parts joined by spaces), the non-empty ones joined by
  newlines;
* a text prompt becomes the filled template; a conversational prompt (a list of ``{role, content}``
  messages) keeps every message but the last, which must be a user turn, and the template is filled with
  that turn's text and becomes the new last user turn.

Where opct differs, it refuses with the row's file, line and field instead of guessing: an empty or missing
context (the teacher prompt would be the prompt itself, and the pair would train nothing), a context that is
neither text nor messages (TRL would ``str()`` it), a row with both ``teacher_prompt`` and
``privileged_context`` (which one is meant?). As for every pair, a text prompt is one user message rendered
with the model's chat template (TRL tokenizes plain text without one). Another template
(TRL's ``teacher_prompt_template``) is not read: write ``teacher_prompt`` in each row for that.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from opct.pairs.contract import Message

#: The field of TRL's SDFT rows that holds the teacher's privileged information.
PRIVILEGED_CONTEXT = "privileged_context"
#: TRL's default ``SDFTConfig.teacher_prompt_template``.
TEACHER_PROMPT_TEMPLATE = "{prompt}\n\n{privileged_context}"


class TeacherPromptBuiltWarning(UserWarning):
    """Pairs of a file had ``privileged_context`` and no ``teacher_prompt``; theirs was built (said once per file)."""


class RowProblem(Exception):
    """What is wrong with one SDFT row: the field and the message (turned into a pair-file problem)."""

    def __init__(self, field: str, message: str):
        super().__init__(field, message)
        self.field, self.message = field, message


def _text_of(content: Any) -> str:
    """A message content's text: a string as it is; a content-part list's ``text`` parts joined by spaces."""
    if isinstance(content, list):
        return " ".join(str(part.get("text", "")) for part in content if isinstance(part, Mapping) and part.get("type") == "text")
    return content if isinstance(content, str) else ""


def privileged_text(value: Any, field: str = PRIVILEGED_CONTEXT) -> str:
    """The text a privileged context stands for (a string, or a list of messages); :class:`RowProblem` when it
    is neither, or holds no text."""
    if isinstance(value, str):
        text = value
    elif isinstance(value, list) and value and all(isinstance(m, Mapping) for m in value):
        text = "\n".join(t for t in (_text_of(m.get("content", "")) for m in value) if t)
    else:
        raise RowProblem(field, f"must be a string or a list of chat messages, got {type(value).__name__}")
    if not text.strip():
        raise RowProblem(field, "holds no text: the teacher prompt would be the prompt itself and the pair would "
                                "train nothing; give the privileged context, or a teacher_prompt")
    return text


def sdft_teacher_prompt(prompt: Any, context: Any, prompt_field: str = "prompt",
                        context_field: str = PRIVILEGED_CONTEXT) -> str | list[Message]:
    """The teacher prompt TRL's SDFT builds from ``prompt`` and ``context`` with its default template.

    ``prompt`` is a string or a list of messages already checked as a prompt (roles, text contents);
    :class:`RowProblem` names the field when the teacher prompt cannot be built."""
    text = privileged_text(context, context_field)
    if isinstance(prompt, str):
        return TEACHER_PROMPT_TEMPLATE.format(prompt=prompt, privileged_context=text)
    last = prompt[-1]
    if last.get("role") != "user":
        raise RowProblem(f"{prompt_field}[{len(prompt) - 1}].role",
                         f"is {last.get('role')!r}: a teacher prompt is built from privileged_context into the last "
                         "user turn (as TRL's SDFT does), so the prompt must end with one")
    turn = TEACHER_PROMPT_TEMPLATE.format(prompt=_text_of(last.get("content", "")), privileged_context=text)
    return [*(dict(m) for m in prompt[:-1]), {"role": "user", "content": turn}]
