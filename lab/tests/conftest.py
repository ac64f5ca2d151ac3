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

tiny_model = shared.tiny_model
pairs_file = shared.pairs_file
world = shared.world
corpus = shared.corpus
run_config = shared.run_config
