"""Loaded tokenizers, kept once per process: a real model's tokenizer takes seconds to parse.

A run, an evaluation, an attack and a selection each load their model's tokenizer, often the same files
in one process (``opct run``, ``opct-lab select``, the tests). :class:`TokenizerCache` keeps the first load of
each set of files and gives it out again, as long as nothing about it changed:

- the files: the key holds each file's name, size and modification time, so a rewritten tokenizer
  folder is loaded afresh;
- the object itself: a caller may change what it was given (its chat template, special tokens, added
  tokens, padding or truncation). Before a kept tokenizer is given out again, its state is compared with
  the state it was loaded in; a changed one is dropped and the files are loaded afresh, so one caller's
  change never reaches another caller's load.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from pathlib import Path

from transformers import PreTrainedTokenizerBase


def files_signature(path: str) -> tuple[tuple[str, int, int], ...]:
    """Name, size and modification time (ns) of every file in a local tokenizer folder; empty for a hub id."""
    folder = Path(path).expanduser()
    if not folder.is_dir():
        return ()
    stats = ((p.name, p.stat()) for p in folder.iterdir() if p.is_file())
    return tuple(sorted((name, st.st_size, st.st_mtime_ns) for name, st in stats))


def tokenizer_state(tok: PreTrainedTokenizerBase) -> tuple[str, ...]:
    """What a caller can change on a loaded tokenizer, as comparable text (a few microseconds)."""
    backend = getattr(tok, "_tokenizer", None)  # a fast tokenizer's Rust object: its padding and truncation
    return (
        str(len(tok)), repr(tok.chat_template), repr(tok.special_tokens_map), repr(tok.added_tokens_decoder),
        tok.padding_side, tok.truncation_side, str(tok.model_max_length),
        repr(getattr(backend, "padding", None)), repr(getattr(backend, "truncation", None)),
    )


class TokenizerCache:
    """Tokenizers loaded once per key, given out again while their state is the state they were loaded in."""

    def __init__(self) -> None:
        self._kept: dict[Hashable, tuple[PreTrainedTokenizerBase, tuple[str, ...]]] = {}

    def get(self, key: Hashable, load: Callable[[], PreTrainedTokenizerBase]) -> PreTrainedTokenizerBase:
        """The tokenizer kept under ``key``, or ``load()``'s (then kept) when none is, or it was changed."""
        kept = self._kept.get(key)
        if kept is not None and tokenizer_state(kept[0]) == kept[1]:
            return kept[0]
        tok = load()
        self._kept[key] = (tok, tokenizer_state(tok))
        return tok

    def clear(self) -> None:
        """Forget every kept tokenizer."""
        self._kept.clear()


LOADED_TOKENIZERS = TokenizerCache()
