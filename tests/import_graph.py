"""The workbench's import graph read from its source: every import, at module top or in a function body."""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Import:
    importer: str  # dotted module name
    target: str  # dotted name: a workbench module, or an outside top-level package
    line: int
    local: bool  # inside a function body
    source: str  # the statement's lines, with their comments
    in_import_guard: bool  # inside a try that catches ImportError


def module_files(package_dir: Path) -> dict[str, Path]:
    """Dotted module name → file, for every .py below `package_dir` (a package's name for its __init__)."""
    root = package_dir.parent
    modules = {}
    for path in sorted(package_dir.rglob("*.py")):
        name = ".".join(path.relative_to(root).with_suffix("").parts)
        modules[name.removesuffix(".__init__")] = path
    return modules


def _known(name: str, modules: Mapping[str, Path]) -> str:
    while name not in modules and "." in name:
        name = name.rsplit(".", 1)[0]
    return name


def _guards_import_error(node: ast.Try) -> bool:
    return any(handler.type is not None and any(name in ast.unparse(handler.type)
                                                for name in ("ImportError", "ModuleNotFoundError"))
               for handler in node.handlers)


def imports_of(module: str, path: Path, modules: Mapping[str, Path], internal: str) -> list[Import]:
    tree = ast.parse(path.read_text())
    lines = path.read_text().splitlines()
    found: list[Import] = []

    def visit(node: ast.AST, in_function: bool, in_guard: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Import | ast.ImportFrom):
                if isinstance(child, ast.ImportFrom) and child.level:
                    raise AssertionError(f"{path}:{child.lineno}: relative import")
                names = ([alias.name for alias in child.names] if isinstance(child, ast.Import)
                         else [f"{child.module}.{alias.name}" for alias in child.names])
                for name in names:
                    target = _known(name, modules) if name.startswith(internal) else name.split(".")[0]
                    source = "\n".join(lines[child.lineno - 1:child.end_lineno])
                    found.append(Import(module, target, child.lineno, in_function, source, in_guard))
            visit(child, in_function or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef),
                  in_guard or (isinstance(child, ast.Try) and _guards_import_error(child)))

    visit(tree, False, False)
    return found


def cycles(edges: Iterable[tuple[str, str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan), each sorted."""
    graph: dict[str, set[str]] = {}
    for a, b in edges:
        if a != b:
            graph.setdefault(a, set()).add(b)
            graph.setdefault(b, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            connect(v)
    return found
