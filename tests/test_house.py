"""The house: the import graph of ``gpudash/`` and ``workloads/`` has no circles, and no module or
function grows past what a reader holds at once.

Every import counts, wherever it stands: at the top, inside a function (a lazy import closes a
circle as surely, only later) and under ``TYPE_CHECKING`` (the names still tie the modules'
meanings together). The floors of docs/architecture.md (no import runs up a floor) are
``tests/test_docs.py``'s; a circle inside one floor is this file's.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.test_docs import ROOT, _imports

PACKAGES = ("gpudash", "workloads")
SIZED = ("gpudash", "workloads", "tests", "benchmarks", "examples")
MAX_MODULE_LINES = 500
MAX_FUNCTION_LINES = 60  # from the ``def`` line to the last line of the body


def _modules(folders: tuple[str, ...]) -> list[Path]:
    return sorted(p for folder in folders for p in (ROOT / folder).rglob("*.py") if "__pycache__" not in p.parts)


def import_graph() -> dict[str, list[str]]:
    """Each module of ``gpudash/`` and ``workloads/`` (as a path) → the modules of both it imports."""
    names = {p.relative_to(ROOT).as_posix() for p in _modules(PACKAGES)}
    return {m: sorted(d for d in _imports(ROOT / m) if d in names) for m in sorted(names)}


def circles(graph: dict[str, list[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's, without recursion)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(graph[root]))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            step = next(edges, None)
            if step is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = _pop_component(stack, on_stack, node)
                    if len(component) > 1:
                        found.append(sorted(component))
            elif step not in index:
                index[step] = low[step] = len(index)
                stack.append(step)
                on_stack.add(step)
                work.append((step, iter(graph[step])))
            elif step in on_stack:
                low[node] = min(low[node], index[step])
    return found


def _pop_component(stack: list[str], on_stack: set[str], root: str) -> list[str]:
    component = []
    while True:
        node = stack.pop()
        on_stack.discard(node)
        component.append(node)
        if node == root:
            return component


def test_the_circle_finder_finds_a_circle_and_only_one() -> None:
    graph = {"a": ["b"], "b": ["c"], "c": ["a", "d"], "d": [], "e": ["e"], "f": ["d"]}
    assert circles(graph) == [["a", "b", "c"]]


def test_the_import_graph_has_no_circles() -> None:
    graph = import_graph()
    assert "gpudash/engine/loop.py" in graph and "workloads/base.py" in graph  # the graph is the tree's
    found = circles(graph)
    assert found == [], "modules that import each other (a module both need, or one import turned round): " + (
        "; ".join(" ⇄ ".join(c) for c in found)
    )


def oversized() -> list[str]:
    """Each module over ``MAX_MODULE_LINES`` lines and each function over ``MAX_FUNCTION_LINES``."""
    found = []
    for path in _modules(SIZED):
        text = path.read_text(encoding="utf-8")
        name = path.relative_to(ROOT).as_posix()
        if (lines := len(text.splitlines())) > MAX_MODULE_LINES:
            found.append(f"{name}: {lines} lines")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    found.append(f"{name}:{node.lineno} {node.name}: {length} lines")
    return found


def test_no_module_over_500_lines_and_no_function_over_60() -> None:
    found = oversized()
    assert found == [], "split by job: " + "; ".join(found)


def test_only_proctree_walks_the_machines_processes() -> None:
    """psutil is imported in one module, and no other lists ``/proc`` by hand (``gpudash.core.proctree``)."""
    walkers = [
        path.relative_to(ROOT).as_posix()
        for path in _modules(PACKAGES)
        if path != ROOT / "gpudash/core/proctree.py"
        and ("psutil" in _imported_roots(path) or 'listdir("/proc")' in path.read_text(encoding="utf-8"))
    ]
    assert walkers == [], "use gpudash.core.proctree: " + ", ".join(walkers)


def _imported_roots(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    roots = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    return roots | {(n.module or "").split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
