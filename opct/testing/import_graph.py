"""The package's import graph, read from the AST of every module (for the architecture test and its metrics).

Every ``import`` and ``from ... import`` counts, at any depth (inside functions and ``TYPE_CHECKING`` blocks
too), with relative imports resolved. ``from pkg import name`` is an edge to ``pkg`` (its ``__init__``) and,
when ``pkg.name`` is a module, to that module as well. Only the standard library is used here.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class InternalImport:
    """One ``import`` statement of a module that names modules of the package."""

    module: str
    line: int
    targets: frozenset[str]
    in_function: bool


def module_name(path: Path, root: Path = PACKAGE) -> str:
    """``opct/runs/layout.py`` -> ``opct.runs.layout``; a package's ``__init__.py`` -> the package."""
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def module_files(root: Path = PACKAGE) -> dict[str, Path]:
    """``{module name: its file}`` for every module under ``root``."""
    return {module_name(p, root): p for p in sorted(root.rglob("*.py"))}


def _statements(tree: ast.AST) -> Iterator[tuple[ast.Import | ast.ImportFrom, bool]]:
    """Every import statement with whether it sits inside a function (at any depth)."""
    work: list[tuple[ast.AST, bool]] = [(tree, False)]
    while work:
        node, in_function = work.pop()
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node, in_function
        inside = in_function or isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
        work.extend((child, inside) for child in ast.iter_child_nodes(node))


def internal_imports(root: Path = PACKAGE) -> list[InternalImport]:
    """Every import statement under ``root`` that names at least one of its modules, sorted by place."""
    files = module_files(root)
    found: list[InternalImport] = []
    for name, path in files.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node, in_function in _statements(ast.parse(path.read_text(encoding="utf-8"))):
            targets: set[str] = set()
            if isinstance(node, ast.Import):
                targets = {a.name for a in node.names if a.name in files}
            else:
                if node.level:
                    base = package
                    for _ in range(node.level - 1):
                        base = base.rpartition(".")[0]
                    source = f"{base}.{node.module}" if node.module else base
                else:
                    source = node.module or ""
                if source in files:
                    targets.add(source)
                targets |= {f"{source}.{a.name}" for a in node.names if f"{source}.{a.name}" in files}
            if targets:
                found.append(InternalImport(name, node.lineno, frozenset(targets), in_function))
    return sorted(found, key=lambda i: (i.module, i.line))


def import_graph(root: Path = PACKAGE) -> dict[str, set[str]]:
    """``{module: the package's modules it imports}`` for every module under ``root``."""
    graph: dict[str, set[str]] = {name: set() for name in module_files(root)}
    for statement in internal_imports(root):
        graph[statement.module] |= statement.targets - {statement.module}
    return graph


def package_of(module: str) -> str:
    """``opct.runs.layout`` -> ``opct.runs``; a top-level module (``opct.models``) and ``opct`` are themselves."""
    return ".".join(module.split(".")[:2])


def package_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """The module graph folded onto packages (``opct.<pkg>``; top-level modules count as themselves)."""
    folded: dict[str, set[str]] = {}
    for module, edges in graph.items():
        source = package_of(module)
        folded.setdefault(source, set()).update(package_of(e) for e in edges)
        folded[source].discard(source)
    return folded


def import_circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan's algorithm, iterative), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    circles.append(sorted(component))
    return sorted(circles)
