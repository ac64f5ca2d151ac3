"""The shape of the package: no import or package circles, the layer rule, few top-level modules, short modules.

The import graph is built from the AST of every module (every ``import`` and ``from ... import``, at
any depth: inside functions and ``TYPE_CHECKING`` blocks too), with relative imports resolved. ``from
pkg import name`` is an edge to ``pkg`` (its ``__init__``) and, when ``pkg.name`` is a module, to that
module as well (:mod:`opct.testing.import_graph`). A strongly connected component of more than one module
is an import circle; folded onto packages (``opct.<pkg>``), one is a package circle, forbidden (an edge that
must close one would be listed in ``PACKAGE_CYCLES_ALLOWED`` with its reason; none does).

The layer rule: the core (config, pairs, models, registry, errors, stats, sampling, diagnostics, training,
methods, runs) never imports the outer layers (axes, evals, attack, organism, judges, report, datasets, ifeval,
inspect_eval, experiments, cli, wiring, testing). It reaches them only through registries that
:mod:`opct.wiring` fills with ``"module:attr"`` strings, imported on first use; those strings are
checked too.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from opct.testing.import_graph import (
    import_circles,
    import_graph,
    internal_imports,
    module_files,
    package_graph,
)

PACKAGE = Path(__file__).resolve().parents[1] / "opct"
CORE = ("config", "pairs", "models", "tokenizer_cache", "registry", "errors", "stats", "sampling", "diagnostics",
        "training", "methods", "runs")
OUTER = ("axes", "evals", "attack", "organism", "judges", "report", "datasets", "ifeval", "inspect_eval",
         "experiments", "cli", "wiring", "testing", "embedded")
#: What each part of the core may import of opct besides itself (ARCHITECTURE.md says why).
MAY_IMPORT = {
    "errors": set(),
    "stats": set(),
    "registry": {"errors"},
    "config": {"errors", "registry"},
    "tokenizer_cache": set(),
    "models": {"config", "errors", "runs", "tokenizer_cache"},
    "pairs": {"errors", "models", "registry"},
    "sampling": {"config", "errors", "models"},
    "diagnostics": {"config", "models", "pairs", "sampling", "stats"},
    "runs": {"config", "errors"},
    "methods": {"config", "errors", "models", "pairs", "registry", "runs", "sampling"},
    "training": {"config", "diagnostics", "errors", "methods", "models", "pairs", "registry", "runs", "sampling"},
}
MAX_TOP_LEVEL = 8
MAX_LINES = 400
#: The most import statements of an opct module inside a function that opct/ may hold (issue 58: 296 before).
MAX_FUNCTION_LEVEL_IMPORTS = 110


def part(module: str) -> str:
    """``opct.runs.checkpoint`` -> ``runs``; ``opct.config`` -> ``config``; ``opct`` -> ``opct``."""
    pieces = module.split(".")
    return pieces[1] if len(pieces) > 1 else "opct"


def module_strings(path: Path) -> list[tuple[int, str]]:
    """String constants that name an opct module (``"opct.attack.grpo:GRPOAttackMethod"``)."""
    return [
        (node.lineno, node.value.split(":")[0])
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith("opct.")
        and " " not in node.value
    ]


GRAPH = import_graph()


def test_no_import_circles():
    circles = import_circles(GRAPH)
    assert not circles, "import circles:\n" + "\n".join(" <-> ".join(c) for c in circles)


#: Package-level import edges allowed to close a cycle, each with why it must (none: the packages import each other
#: one way). An entry whose edge no longer closes a cycle must go.
PACKAGE_CYCLES_ALLOWED: dict[tuple[str, str], str] = {}


def package_cycles_beyond(packages: dict[str, set[str]], allowed: dict[tuple[str, str], str]) -> list[list[str]]:
    """The package cycles left once the allowed edges are taken out of the package graph."""
    return import_circles({p: {e for e in edges if (p, e) not in allowed} for p, edges in packages.items()})


def stale_allowances(packages: dict[str, set[str]], allowed: dict[tuple[str, str], str]) -> list[tuple[str, str]]:
    """The allowed edges that no longer exist or no longer close a cycle (both ends in one component)."""
    component = {p: i for i, members in enumerate(import_circles(packages)) for p in members}
    return [(a, b) for a, b in allowed
            if b not in packages.get(a, ()) or a not in component or component[a] != component.get(b)]


PACKAGES = package_graph(GRAPH)


def test_no_package_cycle_beyond_the_allowed_knots():
    """``opct.<pkg>`` (a top-level module counts as itself) form no cycle but through ``PACKAGE_CYCLES_ALLOWED``."""
    cycles = package_cycles_beyond(PACKAGES, PACKAGE_CYCLES_ALLOWED)
    assert not cycles, "package cycles:\n" + "\n".join(" <-> ".join(c) for c in cycles)


def test_every_allowed_package_knot_still_exists():
    """A knot that was cut leaves the allow-list, so that it cannot grow back unnoticed."""
    assert not stale_allowances(PACKAGES, PACKAGE_CYCLES_ALLOWED), "remove from PACKAGE_CYCLES_ALLOWED: " + str(
        stale_allowances(PACKAGES, PACKAGE_CYCLES_ALLOWED))


def test_the_package_rule_sees_a_new_cycle_and_a_stale_allowance():
    packages = {"opct.a": {"opct.b"}, "opct.b": {"opct.c"}, "opct.c": {"opct.a"}, "opct.d": {"opct.a"}}
    allowed = {("opct.c", "opct.a"): "a known knot"}
    assert package_cycles_beyond(packages, allowed) == [] and stale_allowances(packages, allowed) == []
    packages["opct.a"].add("opct.d")  # a new knot beside the known one
    assert package_cycles_beyond(packages, allowed) == [["opct.a", "opct.d"]]
    packages["opct.b"] = set()  # the known knot cut: its allowance is stale
    assert stale_allowances(packages, allowed) == [("opct.c", "opct.a")]


def test_the_circle_finder_sees_circles_through_a_package_init_and_relative_imports(tmp_path):
    pkg = tmp_path / "opct"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from opct.sub import thing\n")  # a name from a package: its __init__
    (pkg / "sub" / "__init__.py").write_text("from .b import thing\n")  # relative, resolved
    (pkg / "sub" / "b.py").write_text("def f():\n    import opct.a\nthing = 1\n")  # inside a function
    (pkg / "c.py").write_text("import opct.a\n")
    graph = import_graph(pkg)
    assert graph["opct.sub"] == {"opct.sub.b"} and graph["opct.a"] == {"opct.sub"}
    assert import_circles(graph) == [["opct.a", "opct.sub", "opct.sub.b"]]
    (pkg / "sub" / "b.py").write_text("thing = 1\n")
    assert import_circles(import_graph(pkg)) == []


def test_every_part_of_the_package_is_placed_in_a_layer():
    parts = {part(m) for m in GRAPH} - {"opct", "quiet"}
    assert parts <= set(CORE) | set(OUTER), sorted(parts - set(CORE) - set(OUTER))


@pytest.mark.parametrize("core", CORE)
def test_the_core_imports_no_outer_layer(core):
    bad = []
    for module, edges in GRAPH.items():
        if part(module) != core:
            continue
        path = PACKAGE.parent.joinpath(*module.split("."))
        path = path / "__init__.py" if path.is_dir() else path.with_suffix(".py")
        named = [(0, e) for e in edges] + module_strings(path)
        bad += [f"{module}:{line} imports {name}" for line, name in named if part(name) in OUTER]
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("core", sorted(MAY_IMPORT))
def test_each_part_of_the_core_imports_only_what_architecture_md_allows(core):
    used = {part(e) for m, edges in GRAPH.items() if part(m) == core for e in edges} - {core}
    assert used <= MAY_IMPORT[core], f"opct.{core} imports {sorted(used - MAY_IMPORT[core])}"


def test_the_checker_sees_an_edge_inside_a_function(tmp_path):
    pkg = tmp_path / "opct"
    (pkg / "training").mkdir(parents=True)
    (pkg / "attack").mkdir()
    for f in ("__init__.py", "training/__init__.py", "attack/__init__.py", "attack/grpo.py"):
        (pkg / f).write_text("")
    (pkg / "training" / "leaky.py").write_text("def f():\n    from opct.attack.grpo import GRPOAttackMethod\n")
    edges = import_graph(pkg)["opct.training.leaky"]
    assert "opct.attack.grpo" in edges and part("opct.attack.grpo") in OUTER


def test_importing_the_trainer_loads_no_outer_layer():
    outer = tuple(f"opct.{o}" for o in OUTER if o != "wiring")  # the wiring module is loaded by ``import opct``
    code = (
        "import sys, opct.training.loop, opct.methods.opct, opct.methods.bct, opct.config\n"
        f"print(sorted(m for m in sys.modules if m.startswith({outer!r})))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_few_modules_sit_directly_in_the_package():
    top = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(top) <= MAX_TOP_LEVEL, top


def test_no_package_module_is_over_400_lines():
    long = [f"{p.relative_to(PACKAGE)} ({n})" for p in PACKAGE.rglob("*.py") if (n := len(p.read_text().splitlines())) > MAX_LINES]
    assert not long, long


def test_only_the_run_package_names_the_files_of_a_run_directory():
    """``RunLayout`` owns a run directory's layout: no other module spells its file names."""
    names = ("metrics.jsonl", "rollouts.jsonl.gz", "opct_checkpoint.json", "final.tmp")
    bad = []
    for path in PACKAGE.rglob("*.py"):
        if path.parent.name == "runs":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and node.value in names:
                bad.append(f"{path.relative_to(PACKAGE)}:{node.lineno} {node.value!r}")
    assert not bad, "\n".join(bad)


def test_no_outer_layer_imports_an_entry_point():
    """Only the entry points (cli, experiments, inspect_eval) may import the entry points; nothing imports cli."""
    entry = {"cli", "experiments", "inspect_eval"}
    bad = [f"{m} imports {e}" for m, edges in GRAPH.items() for e in edges
           if part(m) not in entry and part(e) in entry]
    bad += [f"{m} imports {e}" for m, edges in GRAPH.items() for e in edges if part(e) == "cli" and part(m) != "cli"]
    assert not bad, "\n".join(bad)


def test_the_leaf_packages_import_nothing_above_them():
    for leaf, allowed in (("datasets", {"errors"}), ("ifeval", {"errors"}), ("embedded", {"errors", "runs"}),
                          ("stats", set())):
        used = {part(e) for m, edges in GRAPH.items() if part(m) == leaf for e in edges} - {leaf}
        assert used <= allowed, f"opct.{leaf} imports {sorted(used - allowed)}"


#: An experiment folder's file names and the folders it keeps one folder per model in (issue 39, item 4).
EXPERIMENT_FILES = ("plan.json", "selection.json", "study.json", "results.json", "samples.jsonl", "attempts.jsonl",
                    "successes.jsonl", "report.html", "report.md", "report.json", "samples.html")
EXPERIMENT_FOLDERS = ("eval", "attack", "train", "replaced")


def experiment_spellings(path: Path) -> list[str]:
    """Where ``path`` spells an experiment's file name (any string constant equal to one) or joins one of
    its folder names onto a path (``root / "eval"``)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Constant) and node.value in EXPERIMENT_FILES:
            found.append(f"{path.name}:{node.lineno} {node.value!r}")
        if (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div) and isinstance(node.right, ast.Constant)
                and node.right.value in EXPERIMENT_FOLDERS):
            found.append(f"{path.name}:{node.lineno} / {node.right.value!r}")
    return found


def test_only_the_experiment_layout_names_the_files_of_an_experiment():
    """``ExperimentLayout`` (``opct/runs/experiment_layout.py``) owns an experiment folder's layout, and its
    eval and attack folders': no other module spells their file names or joins their folder names."""
    owner = PACKAGE / "runs" / "experiment_layout.py"
    bad = [f"{p.relative_to(PACKAGE).parent}/{line}" for p in PACKAGE.rglob("*.py") if p != owner
           for line in experiment_spellings(p)]
    assert not bad, "\n".join(bad)
    assert experiment_spellings(owner)  # the layout is where they are spelled


def test_the_experiment_file_checker_sees_a_name_and_a_joined_folder(tmp_path):
    module = tmp_path / "m.py"
    module.write_text('from pathlib import Path\nPLAN = "plan.json"\ndef f(root: Path):\n    return root / "eval" / "x"\n'
                      'NOTE = "the plan.json of an experiment"\n')
    assert experiment_spellings(module) == ["m.py:2 'plan.json'", "m.py:4 / 'eval'"]


def unexplained_function_level_imports(root: Path = PACKAGE) -> tuple[int, list[str]]:
    """How many imports of an opct module sit inside a function under ``root``, and those with no reason: one
    is explained when it sits in a package ``__init__.py`` (a lazy export), in ``wiring.py`` (a registration
    imported on first use) or under a ``# deferred:`` comment, on its line or the line above."""
    files = module_files(root)
    late = [i for i in internal_imports(root) if i.in_function]
    bad = []
    for statement in late:
        path = files[statement.module]
        if path.name == "__init__.py" or path == root / "wiring.py":
            continue
        lines = path.read_text(encoding="utf-8").splitlines()
        if any("# deferred:" in lines[n] for n in (statement.line - 1, statement.line - 2) if n >= 0):
            continue
        bad.append(f"{path.relative_to(root.parent)}:{statement.line} {lines[statement.line - 1].strip()}")
    return len(late), bad


def test_function_level_imports_are_few_and_each_says_why():
    """At most ``MAX_FUNCTION_LEVEL_IMPORTS`` imports of opct modules sit inside functions, and each is a lazy
    export, a registration in ``wiring.py`` or says on a ``# deferred:`` line what heavy library it keeps back."""
    count, bad = unexplained_function_level_imports()
    assert count <= MAX_FUNCTION_LEVEL_IMPORTS, f"{count} function-level imports in opct/ (at most {MAX_FUNCTION_LEVEL_IMPORTS})"
    assert not bad, "a function-level import with no '# deferred:' reason:\n" + "\n".join(bad)


def test_the_function_level_import_check_sees_an_import_without_a_reason(tmp_path):
    pkg = tmp_path / "opct"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("def lazy():\n    from opct import a\n")  # a lazy export
    (pkg / "a.py").write_text("X = 1\n")
    (pkg / "wiring.py").write_text("def register():\n    import opct.a\n")  # a registration
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "b.py").write_text(
        "import opct.a\n\n\ndef f():\n    # deferred: loads torch\n    from opct import a\n"
        "\n\ndef g():\n    import opct.a\n")
    assert unexplained_function_level_imports(pkg) == (4, ["opct/sub/b.py:10 import opct.a"])
