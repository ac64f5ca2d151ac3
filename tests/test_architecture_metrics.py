"""benchmarks/architecture_metrics.py and the import graph it shares with the architecture test: the pure parts
(package graph, its cycles, function-level imports, spelled file names, the walk's moves and climbs)."""

from __future__ import annotations

from pathlib import Path

from script_loader import load_script

from opct.testing.import_graph import (
    import_circles,
    import_graph,
    internal_imports,
    module_files,
    package_graph,
)

ROOT = Path(__file__).resolve().parents[1]


def _script():
    return load_script("benchmarks/architecture_metrics.py")


def _package(tmp_path: Path) -> Path:
    """``opct`` with a top-level module ``m``, and packages ``a`` and ``b`` that import each other."""
    pkg = tmp_path / "opct"
    for folder in ("a", "b"):
        (pkg / folder).mkdir(parents=True)
        (pkg / folder / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "m.py").write_text("from opct.a.x import f\n")
    (pkg / "a" / "x.py").write_text("import json\n\ndef f():\n    from opct.b import y\n    return y\n")
    (pkg / "b" / "y.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from opct.a import Name\n"
                                    "PLAN = 'plan.json'\nPATH = f'{PLAN}/eval/results.json'\n")
    return pkg


def test_a_package_cycle_through_a_function_level_and_a_type_checking_import(tmp_path):
    pkg = _package(tmp_path)
    packages = package_graph(import_graph(pkg))
    assert packages == {"opct": set(), "opct.m": {"opct.a"}, "opct.a": {"opct.b"}, "opct.b": {"opct.a"}}
    assert import_circles(packages) == [["opct.a", "opct.b"]]
    assert import_circles(import_graph(pkg)) == []  # at module level, no circle


def test_function_level_imports_are_counted_apart_from_type_checking_ones(tmp_path):
    statements = internal_imports(_package(tmp_path))
    assert [(s.module, s.in_function) for s in statements] == [
        ("opct.a.x", True), ("opct.b.y", False), ("opct.m", False)]
    static = _script().static_metrics(tmp_path / "opct")
    assert (static["internal_imports"], static["function_level_imports"], static["function_level_share"]) == (3, 1, 0.333)
    assert static["package_cycles"] == [["opct.a", "opct.b"]]


def test_modules_spelling_experiment_file_names(tmp_path):
    spelled = _script().modules_spelling(module_files(_package(tmp_path)), ("plan.json", "results.json", "report.md"))
    assert spelled == {"plan.json": ["opct.b.y"], "results.json": ["opct.b.y"], "report.md": []}


def test_a_move_climbs_to_a_parent_folder_or_back_to_one_on_the_stack():
    walk = _script().Walk()
    walk.step("opct/experiments/runner.py", [])
    walk.step("opct/experiments/runner.py", [])  # the same file: one stay
    walk.step("opct/experiments/files.py", ["opct/experiments/runner.py"])  # same folder: no move
    walk.step("opct/axes/sycophancy/data.py", ["opct/experiments/runner.py"])  # down: a move
    walk.step("opct/axes/__init__.py", ["opct/experiments/runner.py", "opct/axes/sycophancy/data.py"])  # to the parent
    walk.step("opct/experiments/runner.py", [])  # across, with nothing of its folder below: no climb
    walk.step("opct/axes/sycophancy/data.py", ["opct/experiments/runner.py"])
    walk.step("opct/experiments/runner.py", ["opct/experiments/runner.py"])  # a return: the folder is on the stack
    walk.step("opct/axes/sycophancy/data.py", ["opct/experiments/runner.py"])  # a pair walked before
    summary = walk.summary()
    assert summary["room_list"] == ["opct/experiments/runner.py", "opct/experiments/files.py",
                                    "opct/axes/sycophancy/data.py", "opct/axes/__init__.py"]
    assert (summary["rooms"], summary["folders"], summary["moves"], summary["climbs"]) == (4, 3, 5, 2)
    assert (summary["move_events"], summary["climb_events"]) == (6, 2)


def test_the_recorder_follows_calls_and_returns_of_package_frames_only(tmp_path):
    script = _script()
    recorder = script.WalkRecorder(tmp_path / "opct")
    outer, inner, library = f"{tmp_path}/opct/e/run.py", f"{tmp_path}/opct/a/x.py", f"{tmp_path}/lib.py"

    class Code:
        def __init__(self, file: str, name: str = "f") -> None:
            self.co_filename, self.co_name = file, name

    class Frame:
        def __init__(self, code: Code) -> None:
            self.f_code = code

    codes = {f: Frame(Code(f)) for f in (outer, inner, library)}
    module_body = Frame(Code(inner, "<module>"))
    for frame, event in ((codes[outer], "call"), (module_body, "call"), (codes[inner], "call"), (codes[inner], "return"),
                         (module_body, "return"), (codes[library], "call"), (codes[inner], "call"),
                         (codes[inner], "return"), (codes[library], "return"), (codes[outer], "return")):
        recorder(frame, event, None)
    assert recorder.walk.stays == ["opct/e/run.py", "opct/a/x.py", "opct/e/run.py"]
    assert recorder.walk.summary()["climbs"] == 1 and recorder.stack == []
