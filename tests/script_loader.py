"""Load a script that is not in a package (``benchmarks/*.py``, ``docs/hooks/*.py``) as a module, for its tests."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]


def load_script(relative: str, name: str | None = None) -> ModuleType:
    """The module of the script at ``relative`` (from the repository root), registered in ``sys.modules``
    under ``name`` (its file stem by default) so that its dataclasses can look their module up."""
    path = ROOT / relative
    spec = importlib.util.spec_from_file_location(name or path.stem, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module
