"""The layering rule: the training core knows no axis, no evaluation, no attacker and no organism.

The core reaches those layers only through registries filled by :mod:`opct.builtins`. This test
walks the imports (every ``import`` and ``from ... import``, at any depth, including the ones inside
functions) and the string constants of each core module, and fails on any edge that crosses the line.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "opct"
CORE = [
    "config.py",
    "pairs.py",
    "models.py",
    "rollout.py",
    "lora_merge.py",
    "prefix_attention.py",
    "kv_cache.py",
    "vllm_engine.py",
    "scoring.py",
    "losses.py",
    "manifest.py",
    "registry.py",
    "train.py",
    "run_dir.py",
    "run_logs.py",
    "checkpoint.py",
    "fsdp.py",
    "model_card.py",
    "export.py",
    *(f"methods/{p.name}" for p in sorted((PACKAGE / "methods").glob("*.py"))),
]
OUTER = ("opct.axes", "opct.evals", "opct.attack", "opct.organism", "opct.judges", "opct.report",
         "opct.experiment", "opct.study", "opct.cli", "opct.builtins", "opct.datasets", "opct.testing",
         "opct.inspect_eval")


def _crosses(name: str) -> bool:
    return any(name == o or name.startswith(o + ".") for o in OUTER)


def imported_modules(path: Path) -> list[tuple[int, str]]:
    """``(line, module)`` for every import in a file (``from a import b`` yields ``a`` and ``a.b``)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            base = node.module if node.level == 0 else "opct." + node.module
            found.append((node.lineno, base))
            found += [(node.lineno, f"{base}.{alias.name}") for alias in node.names]
    return found


def module_strings(path: Path) -> list[tuple[int, str]]:
    """String constants that name a module (``"opct.attack.grpo:GRPOAttackMethod"``)."""
    return [
        (node.lineno, node.value.split(":")[0])
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith("opct.")
    ]


@pytest.mark.parametrize("module", CORE)
def test_core_module_imports_no_outer_layer(module):
    path = PACKAGE / module
    bad = [f"{module}:{line} imports {name}" for line, name in imported_modules(path) + module_strings(path) if _crosses(name)]
    assert not bad, "\n".join(bad)


def test_the_checker_sees_an_edge_inside_a_function(tmp_path):
    leaky = tmp_path / "leaky.py"
    leaky.write_text("def f():\n    from opct.attack.grpo import GRPOAttackMethod\n    import opct.organism.world\n")
    names = [n for _, n in imported_modules(leaky)]
    assert _crosses(names[0]) and _crosses("opct.organism.world") and not _crosses("opct.attacks_free")


def test_importing_the_trainer_loads_no_outer_layer():
    outer = tuple(o for o in OUTER if o != "opct.builtins")  # the wiring module is loaded by ``import opct``
    code = (
        "import sys, opct.train, opct.methods.opct, opct.methods.bct, opct.config\n"
        f"print(sorted(m for m in sys.modules if m.startswith({outer!r})))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_no_package_module_is_over_400_lines():
    long = [f"{p.relative_to(PACKAGE)} ({n})" for p in PACKAGE.rglob("*.py") if (n := len(p.read_text().splitlines())) > 400]
    assert not long, long
