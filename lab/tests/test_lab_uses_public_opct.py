"""The lab uses only opct's public names (issue 72): no ``_name`` of opct is imported, reached as an attribute of
an imported opct module or named in a ``"opct.…"`` string, so renaming a private helper inside opct never breaks
the lab. The public names the lab builds on are tested in opct's own ``tests/test_lab_facing_api.py``."""

from __future__ import annotations

import ast
import re
from pathlib import Path

LAB = Path(__file__).resolve().parents[1]
#: A string that is a dotted opct path with a private part: ``opct.a._b`` or ``opct.a:_b`` (not prose).
PRIVATE_PATH = re.compile(r"opct(\.\w+)*[.:]_(?!_)[\w.]*")


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _opct(module: str) -> bool:
    return module == "opct" or module.startswith("opct.")


def private_opct_names(path: Path) -> list[str]:
    """Where the module at ``path`` uses a private opct name: ``from opct.x import _y``, ``import opct._x``,
    ``m._y`` for a name ``m`` bound to an opct import, or a string ``"opct.x._y"`` / ``"opct.x:_y"``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    bound: set[str] = set()
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and not node.level and _opct(node.module or ""):
            parts = (node.module or "").split(".")
            found += [f"{path.name}:{node.lineno} {node.module}.{a.name}" for a in node.names
                      if _private(a.name) or any(map(_private, parts))]
            bound |= {a.asname or a.name for a in node.names}
        elif isinstance(node, ast.Import):
            for a in node.names:
                if _opct(a.name):
                    if any(map(_private, a.name.split("."))):
                        found.append(f"{path.name}:{node.lineno} {a.name}")
                    bound.add(a.asname or a.name.split(".")[0])
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and PRIVATE_PATH.fullmatch(node.value):
            found.append(f"{path.name}:{node.lineno} {node.value}")
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _private(node.attr):
            base = node.value
            while isinstance(base, ast.Attribute):
                base = base.value
            if isinstance(base, ast.Name) and base.id in bound:
                found.append(f"{path.name}:{node.lineno} {ast.unparse(node)}")
    return found


def lab_modules() -> list[Path]:
    return sorted(p for p in LAB.rglob("*.py") if ".egg-info" not in str(p))


def test_the_lab_imports_no_private_opct_name():
    bad = [line for path in lab_modules() for line in private_opct_names(path)]
    assert not bad, "the lab uses a private opct name; make it public in opct, with a test:\n" + "\n".join(bad)


def test_the_private_name_checker_sees_every_form_and_passes_public_and_lab_names(tmp_path):
    module = tmp_path / "m.py"
    module.write_text(
        "from opct.stats.estimate import DEFAULT_SEED, _percentile_ci\n"  # 1: a private name imported
        "def f():\n"
        "    from opct.config import (\n"
        "        RunConfig,\n"
        "        _set_path as sp,\n"  # 3: multi-line, aliased, in a function
        "    )\n"
        "import opct.config._internal\n"  # 7: a private module
        "from opct.diagnostics import measure\n"
        "measure._cluster(None)\n"  # 9: an attribute of an imported opct module
        "import opct.report.ablation as ab\n"
        "ab.sub._compute\n"  # 11: deeper
        'HOOK = "opct.experiments.runner:_held_back"\n'  # 12: a string
        'PATCH = "opct.experiments.runner._eval_tasks"\n'  # 13
        "from opct_lab.report.levels import _profile_text\n"  # the lab's own private name: fine
        "from opct.models import __version__, resolve_model_path\n"  # dunder and public: fine
        "import json\njson._default_decoder\n"  # not opct: fine
        'NOTE = "opct._x is private"\n'  # prose, not a path: fine
        "measure.__doc__\n"
    )
    found = sorted(private_opct_names(module), key=lambda line: int(line.split()[0].split(":")[1]))
    assert [line.split()[0] for line in found] == ["m.py:1", "m.py:3", "m.py:7", "m.py:9", "m.py:11", "m.py:12", "m.py:13"]
    assert found[:2] == ["m.py:1 opct.stats.estimate._percentile_ci", "m.py:3 opct.config._set_path"]
