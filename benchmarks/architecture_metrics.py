r"""The numbers issue 39's closing note gives before and after: knots, late imports, file names, the walk.

Usage::

    OMP_NUM_THREADS=1 PYTHONPATH=. python benchmarks/architecture_metrics.py
    PYTHONPATH=. python benchmarks/architecture_metrics.py --json out.json --md out.md
    PYTHONPATH=. python benchmarks/architecture_metrics.py --no-walk      # the static numbers only (seconds)

What it measures
----------------
The import graph is the architecture test's (:mod:`opct.testing.import_graph`: every import at any
depth, ``TYPE_CHECKING`` blocks and function bodies included).

* **package cycles**: the strongly connected components of more than one node of the *package* graph,
  where a node is ``opct.<pkg>`` and a top-level module (``opct.models``) counts as itself;
* **function-level imports**: import statements inside a function body that name an opct module, and
  their share of all import statements that name one (*internal imports*);
* **modules that spell experiment file names**: modules with a string constant that is, or ends in
  ``/`` followed by, one of ``plan.json``, ``selection.json``, ``results.json``, ``report.md``,
  ``report.json`` (f-string pieces included);
* **modules and lines** under ``opct/`` and under ``lab/`` (the lab's distribution, where it exists);
* **the walks** of ``run_experiment(cfg)``, of the ``opct demo`` command on the same experiment and of
  ``train(cfg)`` (the organism's OPCT config, two steps); the first is described here, the others trace
  the same way over opct's files and the lab's. ``run_experiment(cfg)``: a small experiment (the organism, sycophancy, base + BCT +
  OPCT, one training step, two eval units on the held-out split, a one-round attack, the report) run
  under ``sys.setprofile``. Every Python ``call`` and ``return`` event of a frame whose code is in an
  opct source file moves *control* to the file of the innermost opct frame (library frames in between
  are transparent). Module bodies run by an import, and everything they call, are left out, so the
  walk does not depend on what was imported before. Consecutive events in one file are one stay.

  - a *room* is an opct file visited; *rooms* is how many distinct ones;
  - a *move* is a change of file between two consecutive stays whose folders (directories, such as
    ``opct/experiments`` or ``opct/axes/sycophancy``) differ;
  - a move is a *climb* when its destination folder is the source folder's ancestor, or when a frame
    of the destination folder was already on the opct call stack: a call back into a folder among its
    callers, and every return to a caller in another folder (control handed back up);
  - ``moves`` and ``climbs`` count distinct ``(source file, destination file)`` pairs, each classified
    by its first occurrence; ``move_events`` and ``climb_events`` count every occurrence.

  The run is deterministic (seeded, one thread), so the same code gives the same walk.
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
import tempfile
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
EXPERIMENT_FILE_NAMES = ("plan.json", "selection.json", "results.json", "report.md", "report.json")
#: The experiment the walk runs: small enough for about a minute on one CPU thread.
WALK_OVERRIDES = (
    "name=walk", "axes=[sycophancy]", "methods=[base, bct, opct]", "seeds=[0]", "eval.limit=2",
    "eval.capability=false", "eval.splits=[heldout]", "eval.generation.max_new_tokens=8",
    "eval.allow_unscored=true", "attack.enabled=true", "attack.budget=1", "attack.static_baseline=false",
    "attack.generation.max_new_tokens=8", "train.train.max_steps=1", "train.train.pairs_per_step=2",
    "train.train.checkpoint_every=1", "train.opct.sampling.n=2", "train.opct.sampling.max_new_tokens=8",
    "train.bct.targets.max_new_tokens=8",
)


def folder_of(file: str) -> str:
    """``opct/axes/sycophancy/data.py`` -> ``opct/axes/sycophancy``."""
    return file.rpartition("/")[0]


def is_ancestor(folder: str, of: str) -> bool:
    """Whether ``folder`` strictly contains ``of`` (``opct/axes`` contains ``opct/axes/jailbreak``)."""
    return of.startswith(folder + "/")


@dataclass
class Walk:
    """The stays of control in opct files, and the call stack behind each (see the module docstring)."""

    stays: list[str] = field(default_factory=list)
    #: ``(source, destination)`` -> whether its first occurrence was a climb
    moves: dict[tuple[str, str], bool] = field(default_factory=dict)
    move_events: int = 0
    climb_events: int = 0

    def step(self, destination: str, on_stack: Sequence[str]) -> None:
        """Control is now in ``destination``; ``on_stack``: the files of the opct frames that were already on
        the stack (for a call, its callers; for a return, the destination's own frame and its callers)."""
        if self.stays and self.stays[-1] == destination:
            return
        source = self.stays[-1] if self.stays else None
        self.stays.append(destination)
        if source is None or folder_of(source) == folder_of(destination):
            return
        target = folder_of(destination)
        climb = is_ancestor(target, folder_of(source)) or any(folder_of(f) == target for f in on_stack)
        self.move_events += 1
        self.climb_events += climb
        self.moves.setdefault((source, destination), climb)

    def summary(self) -> dict[str, Any]:
        """Rooms, moves and climbs, with the rooms in the order first visited."""
        rooms = list(dict.fromkeys(self.stays))
        return {
            "rooms": len(rooms), "moves": len(self.moves), "climbs": sum(self.moves.values()),
            "move_events": self.move_events, "climb_events": self.climb_events,
            "folders": len({folder_of(r) for r in rooms}), "room_list": rooms,
        }


class WalkRecorder:
    """A ``sys.setprofile`` hook that feeds a :class:`Walk` with the opct frames' calls and returns."""

    def __init__(self, *roots: Path, names_from: Path | None = None) -> None:
        """Follow the files under ``roots``, each named relative to ``names_from`` (the first root's parent)."""
        base = len(str((names_from or roots[0].parent).resolve())) + 1
        self.roots = [str(r.resolve()) + "/" for r in roots]
        self.base = base
        self.walk = Walk()
        self.stack: list[str] = []
        self.importing = 0
        self._files: dict[Any, str | None] = {}

    def _file(self, code: Any) -> str | None:
        if code not in self._files:
            name = code.co_filename
            self._files[code] = name[self.base:] if name.startswith(tuple(self.roots)) else None
        return self._files[code]

    def __call__(self, frame: Any, event: str, arg: Any) -> None:
        if event not in ("call", "return"):
            return
        code = frame.f_code
        if code.co_name == "<module>":  # an import runs a module body: left out, with all it calls
            self.importing += 1 if event == "call" else -1
            return
        if self.importing:
            return
        file = self._file(code)
        if file is None:
            return
        if event == "call":
            self.walk.step(file, self.stack)
            self.stack.append(file)
        elif self.stack:
            self.stack.pop()
            if self.stack:
                self.walk.step(self.stack[-1], self.stack)


def walk_of_run_experiment(out: Path) -> dict[str, Any]:
    """Run the small experiment under the recorder; the walk's summary and its wall time."""
    from opct.experiments.runner import load_experiment, run_experiment

    cfg = load_experiment(None, [f"output_dir={out}", *WALK_OVERRIDES])
    return traced(lambda: run_experiment(cfg, show_progress=False, log=lambda line: None)) | {
        "experiment": list(WALK_OVERRIDES)}


def traced(action: Any) -> dict[str, Any]:
    """Run ``action()`` under the recorder (opct's files and the lab's); the walk's summary and wall time."""
    recorder = WalkRecorder(*source_roots(), names_from=REPO)
    start = time.perf_counter()
    sys.setprofile(recorder)
    try:
        action()
    finally:
        sys.setprofile(None)
    return {**recorder.walk.summary(), "seconds": round(time.perf_counter() - start, 1)}


def walk_of_demo(out: Path) -> dict[str, Any]:
    """``opct demo`` (the command, parsed by its Typer app) on the same small experiment, one job, in-process."""
    from typer.main import get_command

    from opct.cli.main import app

    args = ["demo", "--no-progress", "--jobs", "1", "--set", f"output_dir={out}"]
    # the demo's picks set each method's steps after the overrides: one step each here too
    for override in (*WALK_OVERRIDES, "method_settings.bct.train.max_steps=1", "method_settings.opct.train.max_steps=1"):
        args += ["--set", override]
    command = get_command(app)
    return traced(lambda: command.main(args, standalone_mode=False)) | {"command": "opct " + " ".join(args[:4])}


#: ``train(cfg)``: the organism's OPCT config, two steps of two pairs, no validation, no checkpoint.
TRAIN_OVERRIDES = ("train.max_steps=2", "train.pairs_per_step=2", "opct.sampling.n=2",
                   "opct.sampling.max_new_tokens=8", "validation.every=null")


def walk_of_train(out: Path) -> dict[str, Any]:
    """``train(cfg)`` on ``configs/organism_opct.yaml`` with :data:`TRAIN_OVERRIDES`."""
    from opct.config import load_config
    from opct.training.loop import train

    cfg = load_config(REPO / "configs" / "organism_opct.yaml", [f"output_dir={out}", *TRAIN_OVERRIDES])
    return traced(lambda: train(cfg, show_progress=False)) | {"config": "configs/organism_opct.yaml",
                                                             "overrides": list(TRAIN_OVERRIDES)}


def source_roots() -> list[Path]:
    """The library's package folder, and the lab's where this checkout has one."""
    return [REPO / "opct", *[p for p in (REPO / "lab" / "opct_lab",) if p.is_dir()]]


def size(root: Path) -> dict[str, int]:
    """Modules (``.py`` files) and their lines under ``root`` (0 and 0 where it does not exist)."""
    files = sorted(root.rglob("*.py")) if root.is_dir() else []
    return {"modules": len(files), "lines": sum(len(f.read_text(encoding="utf-8").splitlines()) for f in files)}


def modules_spelling(files: dict[str, Path], names: Iterable[str]) -> dict[str, list[str]]:
    """``{file name: the modules whose string constants spell it}`` (alone or as a path's last part)."""
    names = tuple(names)
    found: dict[str, set[str]] = {n: set() for n in names}
    for module, path in files.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                for name in names:
                    if node.value == name or node.value.endswith("/" + name):
                        found[name].add(module)
    return {n: sorted(m) for n, m in found.items()}


def static_metrics(root: Path) -> dict[str, Any]:
    """Package cycles, function-level imports and the modules that spell experiment file names."""
    from opct.testing.import_graph import (
        import_circles,
        import_graph,
        internal_imports,
        module_files,
        package_graph,
    )

    packages = package_graph(import_graph(root))
    imports = internal_imports(root)
    late = [i for i in imports if i.in_function]
    spelled = modules_spelling(module_files(root), EXPERIMENT_FILE_NAMES)
    by_package: dict[str, int] = {}
    for i in late:
        key = ".".join(i.module.split(".")[:2])
        by_package[key] = by_package.get(key, 0) + 1
    return {
        "package_cycles": import_circles(packages),
        "internal_imports": len(imports),
        "function_level_imports": len(late),
        "function_level_share": round(len(late) / len(imports), 3) if imports else 0.0,
        "function_level_by_package": dict(sorted(by_package.items())),
        "experiment_file_names": spelled,
        "modules_spelling_experiment_file_names": sorted({m for ms in spelled.values() for m in ms}),
    }


def markdown(result: dict[str, Any]) -> str:
    """The numbers as a short Markdown page."""
    s = result["static"]
    lines = [f"# Architecture metrics ({result['commit']})", "",
             f"- package cycles: {len(s['package_cycles'])}"]
    lines += [f"  - {' <-> '.join(c)}" for c in s["package_cycles"]]
    lines += [f"- function-level imports of opct modules: {s['function_level_imports']} of "
              f"{s['internal_imports']} internal imports ({s['function_level_share']:.0%})",
              f"- modules that spell experiment file names: {len(s['modules_spelling_experiment_file_names'])}"]
    lines += [f"  - `{n}`: {', '.join(ms) or 'none'}" for n, ms in s["experiment_file_names"].items()]
    for name, size_ in result["size"].items():
        lines.append(f"- `{name}`: {size_['modules']} modules, {size_['lines']} lines")
    for key, title in (("walk", "`run_experiment(cfg)`"), ("walk_demo", "`opct demo`"), ("walk_train", "`train(cfg)`")):
        if walk := result.get(key):
            lines += [f"- the walk of {title}: {walk['rooms']} rooms in {walk['folders']} folders, "
                      f"{walk['moves']} moves, {walk['climbs']} climbs (distinct file pairs; "
                      f"{walk['move_events']} moves and {walk['climb_events']} climbs counting every one; "
                      f"{walk['seconds']} s)"]
    return "\n".join(lines) + "\n"


def _commit() -> str:
    import subprocess

    run = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return run.stdout.strip() or "unknown"


def main(argv: list[str] | None = None) -> int:
    """Print the metrics; write them as JSON and Markdown where asked."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--json", type=Path, help="write the metrics as JSON here")
    parser.add_argument("--md", type=Path, help="write the metrics as Markdown here")
    parser.add_argument("--no-walk", action="store_true", help="skip the traced run_experiment (seconds, not a minute)")
    args = parser.parse_args(argv)
    result: dict[str, Any] = {"commit": _commit(), "static": static_metrics(REPO / "opct"),
                              "size": {"opct/": size(REPO / "opct"), "lab/": size(REPO / "lab")}}
    if not args.no_walk:
        for key, walk in (("walk", walk_of_run_experiment), ("walk_demo", walk_of_demo), ("walk_train", walk_of_train)):
            with tempfile.TemporaryDirectory() as tmp:
                result[key] = walk(Path(tmp))
    text = markdown(result)
    print(text, end="")
    if args.json:
        args.json.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    if args.md:
        args.md.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    raise SystemExit(main())
