"""Pair sources: named builders of pairs (``<name>:<argument>`` in ``data.train``), and loading one entry."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from opct.pairs.contract import ConsistencyPair
from opct.pairs.files import read_pairs
from opct.pairs.validation import PairFileError, PairProblem, pairs_from_records
from opct.registry import Registry, UnknownNameError

#: A pair source turns its argument (the text after ``<name>:`` in ``data.train``) into pair records
#: (dicts in the pair contract, or :class:`ConsistencyPair`). Outer layers register theirs
#: (``organism:<axis>:<split>``, ``attacker:<file>``); files and dataset folders need none.
PairSource = Callable[[str], "Sequence[Mapping[str, Any] | ConsistencyPair]"]
PAIR_SOURCES: Registry[PairSource] = Registry("pair source")


def load_pair_source(spec: str, columns: Mapping[str, str] | None = None, split: str | None = None) -> list[ConsistencyPair]:
    """Pairs from one ``data.train`` entry: ``<source>:<argument>`` for a registered pair source
    (e.g. ``organism:sycophancy:train``), else a JSONL/JSON file, a dataset folder or a hub id."""
    prefix, sep, argument = spec.partition(":")
    if sep and prefix in PAIR_SOURCES:
        pairs = pairs_from_records(PAIR_SOURCES.get(prefix)(argument), spec)
        if not pairs:  # e.g. a split name the source does not know
            raise PairFileError([PairProblem(spec, 0, "", f"pair source {prefix!r} gave no pairs for {argument!r}; "
                                                          "check the name after the colon")])
        return pairs
    if sep and len(prefix) > 1 and prefix.isidentifier() and not Path(spec).exists():
        raise UnknownNameError("pair source", prefix, PAIR_SOURCES.names())
    return read_pairs(spec, columns=columns, split=split)

