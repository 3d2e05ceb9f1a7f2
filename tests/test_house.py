"""The house: the import graph of ``gpudash/`` and ``workloads/`` has no circles, no module or
function grows past what a reader holds at once (nor is packed under ``# fmt: skip`` to stay under
it), and no module imports another's private name.

Every import counts, wherever it stands: at the top, inside a function (a lazy import closes a
circle as surely, only later) and under ``TYPE_CHECKING`` (the names still tie the modules'
meanings together). The floors of docs/architecture.md (no import runs up a floor) are
``tests/test_docs.py``'s; a circle inside one floor is this file's.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.test_docs import ROOT, imports_of

PACKAGES = ("gpudash", "workloads")
SIZED = ("gpudash", "workloads", "tests", "benchmarks", "examples")
MAX_MODULE_LINES = 400  # every module of SIZED, the tests' too: one that does one job stays well under it
MAX_FUNCTION_LINES = 60  # from the ``def`` line to the last line of the body


def _modules(folders: tuple[str, ...]) -> list[Path]:
    return sorted(p for folder in folders for p in (ROOT / folder).rglob("*.py") if "__pycache__" not in p.parts)


def import_graph() -> dict[str, list[str]]:
    """Each module of ``gpudash/`` and ``workloads/`` (as a path) → the modules of both it imports."""
    names = {p.relative_to(ROOT).as_posix() for p in _modules(PACKAGES)}
    return {m: sorted(d for d in imports_of(ROOT / m) if d in names) for m in sorted(names)}


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
    """Each module over ``MAX_MODULE_LINES`` lines (a test's too) and each function over
    ``MAX_FUNCTION_LINES``."""
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


def test_no_module_over_400_lines_and_no_function_over_60() -> None:
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


# -- variant names: the registry's, asked of it -------------------------------------------------------
# Variant names that are also plain words (a device, a DataLoader option): a string that is one of them
# is a variant's name only where it stands in a variant's place.
PLAIN_WORDS = frozenset({"cpu", "gpu", "workers"})


def variant_names_allowed() -> tuple[frozenset[str], dict[str, frozenset[str]]]:
    """Every variant name, and the modules that may write some as strings: the registry all of
    them, each family's own module (its class's, or its function's for a family run from one) its own."""
    from workloads.registry import FAMILIES

    everything = frozenset(n for f in FAMILIES.values() for n in f.variant_names)
    allowed: dict[str, frozenset[str]] = {"workloads/registry.py": everything}
    for f in FAMILIES.values():
        for module in (f.module, (f.source or "").partition(":")[0]):
            if module and not module.endswith(".py"):
                path = module.replace(".", "/") + ".py"
                allowed[path] = allowed.get(path, frozenset()) | frozenset(f.variant_names)
    return everything, allowed


def _in_variant_place(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    """``node`` (a string, or one in a tuple/list/set) stands where a variant goes: ``variant=``,
    compared with an expression that names a variant, passed to or assigned to one."""
    while isinstance(parents.get(node), (ast.Tuple, ast.List, ast.Set)):
        node = parents[node]
    up = parents.get(node)
    if isinstance(up, ast.keyword):
        return "variant" in (up.arg or "")
    if isinstance(up, ast.Compare):
        return any("variant" in ast.unparse(side) for side in (up.left, *up.comparators) if side is not node)
    if isinstance(up, ast.Call):  # SetVariant("gpu"), info.variant("cpu"); not variant.refusal("cpu")
        func = up.func.attr if isinstance(up.func, ast.Attribute) else ast.unparse(up.func)
        return "variant" in func.lower()
    if isinstance(up, (ast.Assign, ast.AnnAssign)):
        targets = up.targets if isinstance(up, ast.Assign) else [up.target]
        return any("variant" in ast.unparse(t).lower() for t in targets)
    if isinstance(up, ast.arguments):
        named = [*up.posonlyargs, *up.args][-len(up.defaults) :] if up.defaults else []
        pairs = [*zip(named, up.defaults, strict=True), *zip(up.kwonlyargs, up.kw_defaults, strict=True)]
        return any(d is node and "variant" in a.arg for a, d in pairs)
    return False


def variant_literals(text: str, names: frozenset[str], allowed: frozenset[str] = frozenset()) -> list[str]:
    """The strings of ``text`` that write a variant's name (one of ``names`` not in ``allowed``):
    a name, or a ``-v`` list of them ("serial,pipelined+amp=bf16"); ``PLAIN_WORDS`` only in a
    variant's place. Each as ``LINE: 'TEXT'``."""
    tree = ast.parse(text)
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Constant) and isinstance(node.value, str)):
            continue
        heads = {entry.split("+")[0] for entry in node.value.split(",")}
        if not heads <= names:
            continue
        written = heads - allowed
        if written - PLAIN_WORDS or (written and _in_variant_place(node, parents)):
            found.append((node.lineno, node.col_offset, f"{node.lineno}: {node.value!r}"))
    return [hit for _, _, hit in sorted(found)]


def test_the_variant_scan_finds_a_variants_name_and_not_a_device_or_prose() -> None:
    names = frozenset({"serial", "pipelined", "cpu", "gpu", "fixed", "sync-heavy"})
    written = """
if w.variant == "pipelined": pass
build(name, device, WorkloadOptions(variant="cpu"))
controls.send(SetVariant("gpu"))
ENTRIES = "sync-heavy,fixed+amp=bf16"
def run(variant: str = "cpu") -> None: ...
if info.variant_names[0] in ("serial", "cpu"): pass
"""
    lines = [int(hit.split(":")[0]) for hit in variant_literals(written, names)]
    assert lines == [2, 3, 4, 5, 6, 7, 7]  # the tuple's two
    plain = """
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
if kind == "gpu" or row["row_kind"] == "gpu": pass
help = "Toggle serial ↔ pipelined"
"""
    assert variant_literals(plain, names) == []
    assert variant_literals('x = "pipelined"', names, allowed=frozenset({"pipelined"})) == []


# docs/BENCHMARKS.md's sections quote the published runs' configurations as those runs recorded them:
# a row of docs/bench/ is found by the name it ran under, which a variant renamed since must not change.
PUBLISHED_QUOTES = "benchmarks/page/"


def test_variant_names_are_written_only_in_the_registry_and_their_familys_module() -> None:
    """Elsewhere a variant is asked of the registry (``VariantInfo.pipelined``, ``sync_free``,
    ``FamilyInfo.default_variant``, ``pipeline_toggle``…): a renamed variant breaks nothing unseen.
    The benchmark cases too; the page's sections quote published names (``PUBLISHED_QUOTES``)."""
    names, allowed = variant_names_allowed()
    assert "workloads/encdec.py" in allowed and "workloads/vision.py" in allowed
    found = []
    for path in _modules((*PACKAGES, "benchmarks")):
        name = path.relative_to(ROOT).as_posix()
        if name.startswith(PUBLISHED_QUOTES):
            continue
        hits = variant_literals(path.read_text(encoding="utf-8"), names, allowed.get(name, frozenset()))
        found += [f"{name}:{hit}" for hit in hits]
    assert found == [], "ask the registry (workloads.registry) which variant: " + "; ".join(found)


FIRST_PARTY = ("gpudash", "workloads", "benchmarks", "tests", "examples")  # and a relative import (the bootstrap's)


def private_imports(text: str) -> list[str]:
    """Each ``from <first-party module> import _name`` in ``text`` (a relative import is one too: a
    package's modules, the bootstrap's, import each other so): a private name used outside its
    module (make it public where it is shared, or move it to the module that uses it)."""
    found = []
    for node in ast.walk(ast.parse(text)):
        if not isinstance(node, ast.ImportFrom):
            continue
        module = "." * node.level + (node.module or "")
        if node.level or module.startswith(FIRST_PARTY):
            found += [
                f"{node.lineno}: from {module} import {alias.name}"
                for alias in node.names
                if alias.name.startswith("_") and not alias.name.startswith("__")
            ]
    return found


def test_the_private_import_scan_finds_a_private_name_and_not_a_public_or_foreign_one() -> None:
    written = """
from gpudash.core.faults import _secret
from .process import (
    public,
    _Hidden,
)
from torch.utils._python_dispatch import _get_current_dispatch_mode_stack
from gpudash import __version__
from . import _sibling
"""
    assert private_imports(written) == [
        "2: from gpudash.core.faults import _secret",
        "3: from .process import _Hidden",
        "9: from . import _sibling",
    ]


def test_no_module_imports_a_private_name_of_another() -> None:
    found = [
        f"{path.relative_to(ROOT).as_posix()}:{hit}"
        for path in _modules(SIZED)
        for hit in private_imports(path.read_text(encoding="utf-8"))
    ]
    assert found == [], "a private name used outside its module: " + "; ".join(found)


def test_no_statement_is_packed_under_fmt_skip() -> None:
    """The formatter lays out every statement: ``# fmt: skip`` kept lines packed to stay under the
    module limit (a module near it has more than one job). An aligned table may still use
    ``# fmt: off``/``on`` (``gpudash/core/metrics.py``'s)."""
    found = [
        f"{path.relative_to(ROOT).as_posix()}:{number}"
        for path in _modules(SIZED)
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if line.rstrip().endswith("# fmt: skip")
    ]
    assert found == [], "let ruff format these: " + "; ".join(found)
