"""lm-eval's IFEval instruction checkers, loaded offline.

The checkers are lm-eval-harness's (``lm_eval.tasks.ifeval``: Google's reference implementation as
lm-eval maintains it). Importing them needs ``immutabledict``, ``langdetect`` and ``nltk``; at import
lm-eval's ``instructions_util`` downloads NLTK's ``punkt_tab`` when NLTK cannot find it. opct ships
the English ``punkt_tab`` files (``opct/ifeval/nltk_data``, see its README for origin and sha256s)
and puts that folder *first* on ``nltk.data.path`` before the import, so

* no download is ever attempted (the import fails with a fault instead, should the files be missing);
* sentence counts come from these exact files, whatever NLTK data a user has installed elsewhere
  (their other NLTK resources and languages are still found: only ``punkt_tab/english`` is here).

``langdetect`` is seeded (``DetectorFactory.seed = 0``): unseeded, it can give a different language
for the same short text from one call to the next.
"""

from __future__ import annotations

import functools
import importlib.metadata
from pathlib import Path
from types import ModuleType
from typing import Any

from opct.errors import FAULT, OpctError, require_extra

__all__ = ["NLTK_DATA_DIR", "InstructionError", "checker_version", "instruction_ids", "lm_eval_ifeval"]

#: The NLTK data opct ships for lm-eval's sentence counting (English Punkt, ``punkt_tab`` format).
NLTK_DATA_DIR = Path(__file__).resolve().parent / "nltk_data"

_EXTRA = "data"
_NEEDED_FOR = "IFEval scoring (lm-eval's instruction checkers)"


class InstructionError(OpctError, ValueError):
    """An IFEval instruction id is unknown, or its kwargs do not fit the instruction."""


class MissingNltkDataError(OpctError):
    """The NLTK data shipped in opct's package is missing (a broken install)."""

    exit_code = FAULT


def use_shipped_nltk_data(nltk: ModuleType) -> None:
    """Put :data:`NLTK_DATA_DIR` first on ``nltk.data.path`` and check the English Punkt files are found.

    Raises :class:`MissingNltkDataError` when they are not, rather than letting lm-eval download them.
    """
    folder = str(NLTK_DATA_DIR)
    if folder in nltk.data.path:
        nltk.data.path.remove(folder)
    nltk.data.path.insert(0, folder)
    try:
        nltk.data.find("tokenizers/punkt_tab/english/")
    except LookupError as err:
        raise MissingNltkDataError(
            f"{NLTK_DATA_DIR / 'tokenizers/punkt_tab/english'}: NLTK's English Punkt data, shipped with opct "
            "for IFEval's sentence counts, is missing. Reinstall opct (pip install --force-reinstall opct)."
        ) from err


@functools.cache
def lm_eval_ifeval() -> ModuleType:
    """lm-eval's ``lm_eval.tasks.ifeval.utils`` (strict/loose tests, ``process_results``), imported offline.

    Raises :class:`opct.errors.MissingExtraError` naming the ``data`` extra when lm-eval or one of the
    packages its checkers import is not installed.
    """
    require_extra("immutabledict", _EXTRA, _NEEDED_FOR)
    langdetect = require_extra("langdetect", _EXTRA, _NEEDED_FOR)
    nltk = require_extra("nltk", _EXTRA, _NEEDED_FOR)
    use_shipped_nltk_data(nltk)
    langdetect.DetectorFactory.seed = 0
    return require_extra("lm_eval.tasks.ifeval.utils", _EXTRA, _NEEDED_FOR)


def instruction_dict() -> dict[str, Any]:
    """lm-eval's registry: instruction id -> checker class."""
    return dict(lm_eval_ifeval().instructions_registry.INSTRUCTION_DICT)


def instruction_ids() -> frozenset[str]:
    """The instruction ids lm-eval's IFEval checkers know (the 25 of the IFEval set)."""
    return frozenset(instruction_dict())


@functools.cache
def checker_version() -> str:
    """The installed lm-eval version, recorded as the IFEval judge's version (read once: every record
    of an IFEval eval carries it)."""
    lm_eval_ifeval()
    return importlib.metadata.version("lm_eval")


def validate_instructions(instruction_ids: list[str], kwargs_list: list[dict[str, Any]]) -> None:
    """Raise :class:`InstructionError` for an unknown id or kwargs its checker does not take."""
    registry = instruction_dict()
    for index, (iid, kwargs) in enumerate(zip(instruction_ids, kwargs_list, strict=True)):
        if iid not in registry:
            raise InstructionError(
                f"instruction {index}: unknown IFEval instruction id {iid!r}; known ids: {', '.join(sorted(registry))}"
            )
        try:
            registry[iid](iid).build_description(**{k: v for k, v in kwargs.items() if v})
        except (TypeError, ValueError) as err:
            raise InstructionError(f"instruction {index} ({iid}): kwargs {kwargs!r} do not fit it: {err}") from err
