"""Quiet by default: the libraries' noise off, opct's own warnings as one clean line.

Every ``opct`` command runs inside :func:`quiet_output` unless ``opct --verbose ...`` or
``OPCT_VERBOSE=1`` asks for the libraries' output as they print it. Quiet means:

* transformers, datasets and huggingface_hub log only errors and draw no progress bars (their
  "Loading weights" / "Writing model shards" bars, "generation flags are not valid", ...);
* a few known warnings that tell the user nothing are filtered by message and category
  (:data:`KNOWN_NOISE`), never by a blanket ignore;
* every other warning still shows, as one line: ``warning: <message>`` for opct's own
  (:class:`~opct.methods.base.OffPolicySamplingWarning`, :class:`~opct.runs.errors.RunDirWarning`, ...),
  ``warning: <message> (<Category>, <file>:<line>)`` for anyone else's;
* in a run of several processes (``accelerate launch``, torchrun: :func:`process_rank`), a warning prints on
  rank 0 only, since every rank raises the same ones; a warning about one rank alone (its category has
  ``per_rank = True``, e.g. :class:`RankWarning`) prints on every rank that raises it, as ``rank N: ...``.

Libraries not yet imported are set through their environment variables (so that importing one
stays lazy); those already imported through their own API. Everything is put back when the
context exits, except the state of a library first imported inside it.
"""

from __future__ import annotations

import os
import sys
import warnings
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any, Protocol

from opct.errors import OpctWarning, redact_secrets

#: ``(message regex, category)`` of warnings that tell an opct user nothing: the library's own
#: deprecations of calls opct does not make, and fixes the library applies by itself.
KNOWN_NOISE: tuple[tuple[str, type[Warning]], ...] = (
    # transformers 5 deprecates a property that peft and transformers' own loading code still read.
    (r"`is_gradient_checkpointing` is deprecated", FutureWarning),
    # peft sets fan_in_fan_out itself for GPT-2-style Conv1D layers and says so on every LoRA model.
    (r"fan_in_fan_out is set to False but the target module is `Conv1D`", UserWarning),
)

#: Environment variables that quiet a library imported later, and their quiet value.
QUIET_ENV = {
    "TRANSFORMERS_VERBOSITY": "error",
    "DATASETS_VERBOSITY": "error",
    "HF_HUB_VERBOSITY": "error",
    "HF_HUB_DISABLE_PROGRESS_BARS": "1",
    "HF_DATASETS_DISABLE_PROGRESS_BARS": "1",
}

class CommandContext(Protocol):
    """What :func:`quiet_unless_verbose` needs of a click/typer context: to hold a resource until it closes."""

    def with_resource(self, context_manager: AbstractContextManager[Any]) -> Any: ...


#: Set by ``opct --verbose``.
VERBOSE = {"on": False}


def verbose_enabled() -> bool:
    """Whether the libraries' own output is wanted (``opct --verbose`` or ``OPCT_VERBOSE=1``)."""
    return VERBOSE["on"] or os.environ.get("OPCT_VERBOSE", "") not in ("", "0")


def format_warning(message: Warning | str, category: type[Warning], filename: str, lineno: int,
                   line: str | None = None) -> str:
    """One line for a warning: ``warning: <message>``, with the category and place when it is not opct's."""
    text = redact_secrets(" ".join(str(message).split()))
    if category.__module__.split(".")[0] == "opct":
        return f"warning: {text}\n"
    return f"warning: {text} ({category.__name__}, {Path(filename).name}:{lineno})\n"


class RankWarning(OpctWarning):
    """A notice about this process alone in a run of several (its own shard, its own device): printed on every
    rank that raises it, as ``rank N: <message>`` (``per_rank``), where other warnings print on rank 0 only."""

    per_rank = True


def _env_int(key: str) -> int | None:
    value = os.environ.get(key, "").strip()
    return int(value) if value.isdigit() else None


def process_rank() -> tuple[int, int]:
    """``(rank, world size)`` of this process: torch.distributed's once it is initialized, else what the launcher
    set (``RANK`` and ``WORLD_SIZE``, which ``accelerate launch`` and torchrun set, as accelerate's
    ``PartialState`` reads them; ``LOCAL_RANK`` when no ``RANK``), else ``(0, 1)``: a process started alone."""
    dist = sys.modules.get("torch.distributed")
    if dist is not None and dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    rank = _env_int("RANK")
    rank = _env_int("LOCAL_RANK") if rank is None else rank
    world = _env_int("WORLD_SIZE")
    return rank or 0, max(world or 1, (rank or 0) + 1)


def once_per_command(show: Any) -> Any:
    """``warnings.showwarning`` that prints a warning only the first time its text is seen (Python's own rule
    is once per place in the code, so one notice raised from three places, or for three runs, printed three
    identical lines), and in a run of several processes only on rank 0 (:func:`process_rank`): every rank
    raises the same warnings, so they printed once per rank. A category with ``per_rank = True``
    (:class:`RankWarning`) is about the rank that raises it: it prints on every rank, as ``rank N: ...``."""
    seen: set[tuple[type[Warning], str]] = set()

    def show_once(message: Warning | str, category: type[Warning], filename: str, lineno: int,
                  file: Any = None, line: str | None = None) -> None:
        key = (category, " ".join(str(message).split()))
        if key in seen:
            return
        seen.add(key)
        rank, world = process_rank()
        if getattr(category, "per_rank", False):
            if world > 1:
                message = f"rank {rank}: {message}"
        elif rank != 0:
            return
        show(message, category, filename, lineno, file, line)

    return show_once


def _quiet_libraries(user_set: set[str]) -> list[tuple[Any, ...]]:
    """Quiet the libraries already imported, except where the user set their variable; return
    ``(function, *args)`` calls that undo it."""
    undo: list[tuple[Any, ...]] = []
    if "huggingface_hub" in sys.modules:
        from huggingface_hub import utils as hub

        if "HF_HUB_VERBOSITY" not in user_set:
            undo.append((hub.logging.set_verbosity, hub.logging.get_verbosity()))
            hub.logging.set_verbosity_error()
        if "HF_HUB_DISABLE_PROGRESS_BARS" not in user_set and not hub.are_progress_bars_disabled():
            undo.append((hub.enable_progress_bars,))
            hub.disable_progress_bars()
    if "transformers" in sys.modules:
        from transformers.utils import logging as tf_logging

        if "TRANSFORMERS_VERBOSITY" not in user_set:
            undo.append((tf_logging.set_verbosity, tf_logging.get_verbosity()))
            tf_logging.set_verbosity_error()
        if "HF_HUB_DISABLE_PROGRESS_BARS" not in user_set and tf_logging.is_progress_bar_enabled():
            undo.append((tf_logging.enable_progress_bar,))
            tf_logging.disable_progress_bar()
    if "datasets" in sys.modules:
        from datasets.utils import logging as ds_logging
        from datasets.utils.tqdm import (
            are_progress_bars_disabled,
            disable_progress_bars,
            enable_progress_bars,
        )

        if "DATASETS_VERBOSITY" not in user_set:
            undo.append((ds_logging.set_verbosity, ds_logging.get_verbosity()))
            ds_logging.set_verbosity_error()
        if "HF_DATASETS_DISABLE_PROGRESS_BARS" not in user_set and not are_progress_bars_disabled():
            undo.append((enable_progress_bars,))
            disable_progress_bars()
    return undo


@contextmanager
def quiet_output() -> Iterator[None]:
    """Run the body with the libraries quiet and warnings as one line each; restore everything after.

    A variable the user set themselves (``TRANSFORMERS_VERBOSITY=info opct ...``) is kept, and so is
    what it governs in a library already imported.
    """
    saved_env = {key: os.environ.get(key) for key in QUIET_ENV}
    user_set = {key for key, value in saved_env.items() if value is not None}
    for key, value in QUIET_ENV.items():
        os.environ.setdefault(key, value)
    undo = _quiet_libraries(user_set)
    saved_format, saved_show = warnings.formatwarning, warnings.showwarning
    with warnings.catch_warnings():
        for pattern, category in KNOWN_NOISE:
            warnings.filterwarnings("ignore", message=pattern, category=category)
        warnings.formatwarning = format_warning
        warnings.showwarning = once_per_command(saved_show)
        try:
            yield
        finally:
            warnings.formatwarning, warnings.showwarning = saved_format, saved_show
            for setter, *args in reversed(undo):
                setter(*args)
            for key, value in saved_env.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value


def quiet_unless_verbose(ctx: CommandContext, verbose: bool) -> None:
    """From the ``opct`` callback: record ``--verbose``, and unless verbose run the command in :func:`quiet_output`."""
    VERBOSE["on"] = verbose
    if not verbose_enabled():
        ctx.with_resource(quiet_output())
