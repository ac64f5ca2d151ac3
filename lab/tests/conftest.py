"""The lab's tests share the library's fixtures and helpers (``tests/conftest.py``, ``tests/report_fixtures.py``,
...): the library's test folder is put on the path and its fixtures are re-exported here."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests"))

_spec = importlib.util.spec_from_file_location("opct_tests_conftest", REPO / "tests" / "conftest.py")
shared = importlib.util.module_from_spec(_spec)
sys.modules["opct_tests_conftest"] = shared  # lab tests import helpers from it by this name
_spec.loader.exec_module(shared)

# Every name of the library's conftest, fixtures and helpers alike: under one pytest process both folders'
# conftest modules are importable as ``conftest``, and a library test's ``from conftest import make_pairs`` may
# find this one first, so this module must hold everything the library's does.
globals().update({name: value for name, value in vars(shared).items() if not name.startswith("__")})
