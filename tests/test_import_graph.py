"""The engine's import graph: layered, and without module-level cycles.

The engine is a library: it must never import the notebook layers (magic, widgets,
profiling) nor the facade that wraps it (``plansight``, ``session``, ``query``, ``cli``,
``errors``), not even inside a function. Inside ``engine/`` no two modules may import each
other at module level, however indirectly: a cycle means a shared piece sits in the wrong
module, and moving it is the fix, not a function-level import. (A module naming its own
package, ``from plansight.engine.functions.scalar import types``, is not a cycle: the package
always runs first.)

Imports are read from the source (ast), so the test sees every module, imported or not.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ENGINE = ROOT / "engine"

FORBIDDEN_PREFIXES = ("plansight.magic", "plansight.widgets", "plansight.profiling",
                      "plansight.datasets")
FORBIDDEN_EXACT = {"plansight", "plansight.session", "plansight.query", "plansight.cli",
                   "plansight.errors"}


def _module_name(path: Path) -> str:
    parts = path.relative_to(ENGINE).with_suffix("").parts
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(("plansight", "engine", *parts))


def _imports(path: Path) -> tuple[set[str], set[str]]:
    """(every module ``path`` imports anywhere, those it imports at module level).

    ``from package import name`` counts as importing ``package.name`` when that is a module.
    Imports under ``if TYPE_CHECKING:`` do not run and are left out.
    """
    tree = ast.parse(path.read_text(), str(path))
    everywhere, top = set(), set()

    def targets(node: ast.AST) -> set[str]:
        if isinstance(node, ast.Import):
            return {alias.name for alias in node.names}
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found = {node.module}
            for alias in node.names:
                candidate = f"{node.module}.{alias.name}"
                if _is_engine_module(candidate):
                    found.add(candidate)
            return found
        return set()

    for node in ast.walk(tree):
        everywhere |= targets(node)
    for node in tree.body:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            continue
        for inner in ast.walk(node) if isinstance(node, (ast.If, ast.Try)) else [node]:
            top |= targets(inner)
    return everywhere, top


def _is_engine_module(name: str) -> bool:
    if not name.startswith("plansight.engine"):
        return False
    relative = name.split(".")[2:]
    base = ENGINE.joinpath(*relative)
    return base.with_suffix(".py").exists() or (base / "__init__.py").exists()


MODULES = {_module_name(p): p for p in sorted(ENGINE.rglob("*.py"))}


def test_engine_imports_no_notebook_layer_nor_facade():
    offenders = []
    for name, path in MODULES.items():
        everywhere, _ = _imports(path)
        for target in everywhere:
            if target in FORBIDDEN_EXACT or target.startswith(FORBIDDEN_PREFIXES):
                offenders.append(f"{name} imports {target}")
    assert offenders == []


def test_no_module_level_import_cycle_inside_engine():
    graph = {}
    for name, path in MODULES.items():
        _, top = _imports(path)
        # a package's __init__ always runs before its modules: an edge to an ancestor is no cycle
        graph[name] = sorted(t for t in top if t in MODULES and not name.startswith(t))
    cycles = [component for component in _strongly_connected(graph) if len(component) > 1]
    assert cycles == [], "module-level import cycles: " + "; ".join(
        " <-> ".join(sorted(c)) for c in cycles)


def _strongly_connected(graph: dict[str, list[str]]) -> list[list[str]]:
    """Tarjan's algorithm, iterative (the graph has a few hundred nodes)."""
    index, low, on_stack, stack, components = {}, {}, set(), [], []
    counter = 0
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(graph[root]))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, successors = work[-1]
            advanced = False
            for successor in successors:
                if successor not in index:
                    index[successor] = low[successor] = counter
                    counter += 1
                    stack.append(successor)
                    on_stack.add(successor)
                    work.append((successor, iter(graph[successor])))
                    advanced = True
                    break
                if successor in on_stack:
                    low[node] = min(low[node], index[successor])
            if advanced:
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
                components.append(component)
    return components


def test_cycle_finder_sees_a_cycle():
    graph = {"a": ["b"], "b": ["c"], "c": ["a"], "d": ["a"]}
    cycles = [sorted(c) for c in _strongly_connected(graph) if len(c) > 1]
    assert cycles == [["a", "b", "c"]]


def test_every_engine_module_imports():
    import importlib

    for name in MODULES:
        importlib.import_module(name)


def test_engine_modules_import_engine_modules_at_module_level_only():
    """A function-level import hides a dependency (and usually a cycle) from readers."""
    hidden = []
    for name, path in MODULES.items():
        tree = ast.parse(path.read_text(), str(path))
        for function in ast.walk(tree):
            if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(function):
                if isinstance(node, ast.ImportFrom) and (
                        node.level or (node.module or "").startswith("plansight.engine")):
                    hidden.append(f"{name}:{node.lineno} {ast.unparse(node)}")
    assert hidden == []
