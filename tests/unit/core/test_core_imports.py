"""The core's modules import each other in one direction only: no import cycle, not even one
hidden in a function body or under TYPE_CHECKING (a newcomer reads modules bottom-up)."""

from __future__ import annotations

import ast
from pathlib import Path

import queuectl.core

PACKAGE = "queuectl.core"


def _imports(path: Path, modules: set[str]) -> set[str]:
    """Core modules named by any import anywhere in the file (top level or not)."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module is not None and node.level == 0:
            if node.module == PACKAGE:
                for alias in node.names:
                    out.add(alias.name if alias.name in modules else "__init__")
            elif node.module.startswith(PACKAGE + "."):
                out.add(node.module.removeprefix(PACKAGE + ".").split(".")[0])
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith(PACKAGE + "."):
                    out.add(alias.name.removeprefix(PACKAGE + ".").split(".")[0])
    return out


def _graph() -> dict[str, set[str]]:
    root = Path(queuectl.core.__file__).parent
    files = {p.stem: p for p in root.glob("*.py")}
    return {name: _imports(path, set(files)) - {name} for name, path in files.items()}


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as a path of module names, or None."""
    done: set[str] = set()
    path: list[str] = []

    def visit(name: str) -> list[str] | None:
        if name in path:
            return [*path[path.index(name) :], name]
        if name in done:
            return None
        path.append(name)
        for dep in sorted(graph.get(name, ())):
            found = visit(dep)
            if found is not None:
                return found
        path.pop()
        done.add(name)
        return None

    for name in sorted(graph):
        found = visit(name)
        if found is not None:
            return found
    return None


def test_the_core_has_no_import_cycle() -> None:
    cycle = _cycle(_graph())
    assert cycle is None, "import cycle in queuectl.core: " + " -> ".join(cycle or ())


def test_the_cycle_finder_finds_a_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycle(graph) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None
