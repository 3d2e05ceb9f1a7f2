"""No private API of a dependency outside the adapters (torch-free: the code is read, not run).

A dependency's private name (``_name`` on an object of torch, Textual, plotext, argparse, warnings,
…; a private module such as ``torch._inductor``) may change in any release. Where a public
equivalent does the same, the code uses it; the rest sits in one of ``ADAPTERS``, each saying why
(and the upstream issue). A new use elsewhere fails here: use the public API, or move the use into
an adapter (or a new one, listed below with its reason).

What counts as a use, read from each module's syntax tree:

- importing a private module or name of a package that is not the project's
  (``import torch._inductor.config``, ``from textual._styles_cache import …``, ``from x import _y``);
- reading, writing or ``getattr``-ing an attribute ``_name`` (also in a quoted annotation) that no
  module of the project defines: the project's own private names (a method, a function, a class,
  ``self._x = …``, a slot) are its own business. ``super()._x`` needs the project to define ``_x``
  itself, not only to override it (a method that calls ``super()._x`` does not count as defining it);
- a class that defines (overrides) a private method or attribute its dependency base class has
  (the base imported to ask; torch's are not, to keep this test torch-free).
"""

from __future__ import annotations

import ast
import functools
import importlib
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("gpudash", "workloads")
OWN = {"gpudash", "workloads", "tests"}  # top-level packages that are the project's

# The modules allowed to use private APIs, each for what it says (the reason and the upstream
# issue are in the module's own docstring).
ADAPTERS = {
    "gpudash/arguments/argparse_adapter.py": "argparse's list of a parser's actions (python/cpython#144932)",
    "gpudash/tui/plotext_adapter.py": "plotext's matrix fast path, textual-plotext's sizing and theme name",
    "gpudash/tui/textual_adapter.py": "Textual's exception hook (Textualize/textual#2818)",
    "gpudash/tui/footer.py": "Textual's reactive watchers and styles cache (Textualize/textual#6666, #6665)",
    "gpudash/tui/render_cache.py": "Rich Style's colour and attribute fields behind Textual's escape codes",
    "workloads/torch_adapter.py": "shared-memory batches, compile mode options, loader workers "
    "(pytorch/pytorch#48558, #71383)",
    "gpudash/boot/gpudash_boot/compiled_flops.py": "torch's FakeTensorMode (a compiled model's FLOPs counted on "
    "fake tensors of its step's shapes; torch has no public fake-tensor mode), a compiled module's _orig_mod and "
    "stateless._reparametrize_module (functional_call's context, around a module's uncompiled bound method)",
    "gpudash/boot/gpudash_boot/flop_count.py": "torch's dispatch modes (TorchDispatchMode, the thread's mode "
    "stack), an operator's overload packet and FlopCounterMode's raw-formula flag: the FLOPs by dtype, a count "
    "started and stopped apart",
    "gpudash/boot/gpudash_boot/saved_tensors.py": "autograd's stack of default saved-tensor hooks (push, pop, top): a "
    "sampled step's saved tensors counted from one step boundary to the next, and a job's own hooks never popped "
    "(the public context manager pops whatever is on top)",
    "gpudash/boot/gpudash_boot/comm.py": "c10d's _world.pg_coalesce_state (a call inside _coalescing_manager "
    "only queues a collective): no public API sees it",
    "gpudash/boot/gpudash_boot/ddp.py": "DDP's _pre_forward/_post_forward (its per-forward bookkeeping, whose "
    "host-device syncs torch prints from C++), its _distributed_broadcast_coalesced (its buffers' broadcast, in C++) "
    "and _register_builtin_comm_hook (a hook of the job's that runs in C++): no public API sees them",
    "gpudash/boot/gpudash_boot/syncs.py": "torch._C._cuda_set_sync_debug_mode: the sync debug mode set from any "
    "thread without the Python warning and the filter changes of torch.cuda.set_sync_debug_mode",
    "gpudash/boot/gpudash_boot/allocator_history.py": "the CUDA caching allocator's history (torch.cuda.memory."
    "_record_memory_history, _snapshot): the lines that hold a job's peak; no public name yet",
    "gpudash/boot/gpudash_boot/compile_watch.py": "dynamo's bounded list of compile records (torch._dynamo.utils."
    "_compilation_metrics), whose newest entry tells a compile refused at the recompile limit, which calls no "
    "callback; read besides the public get_compilation_metrics (pytorch/pytorch#135458)",
    "gpudash/boot/gpudash_boot/loader.py": "DataLoader iterators' __next__ (_BaseDataLoaderIter, the base of "
    "every iterator a DataLoader hands out): the one place each batch of an unmodified job passes; a "
    "single-process DataLoader iterator's fetcher (_dataset_fetcher): the only place a batch's Dataset calls and "
    "its collation can be told apart",
}
# Underscore names a dependency documents as public.
PUBLIC = {("os", "_exit"), ("sys", "_getframe"), ("sys", "_current_frames")}  # each in the Python docs
# Base classes not imported to look for overridden private names (heavy, or they need a GPU).
NOT_IMPORTED = {"torch", "torchvision", "triton", "pynvml"}


def _modules() -> list[Path]:
    return sorted(p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py"))


def _rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__")) and name != "_"


def _own(module: str) -> bool:
    return module.split(".", 1)[0] in OWN


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


class _Module:
    """One module's tree, its imports (local name → dotted origin) and its classes."""

    def __init__(self, path: Path, source: str | None = None) -> None:
        self.path, self.rel = path, _rel(path)
        self.tree = ast.parse(path.read_text(encoding="utf-8") if source is None else source)
        self.name = _module_name(path)
        self.imports: dict[str, str] = {}
        package = self.name.split(".")[:-1] if path.name != "__init__.py" else self.name.split(".")
        self.nodes = list(ast.walk(self.tree))
        for node in self.nodes:
            if isinstance(node, ast.Import):
                for a in node.names:
                    self.imports[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    base = ".".join([*package[: len(package) - node.level + 1], *([base] if base else [])])
                for a in node.names:
                    self.imports[a.asname or a.name] = f"{base}.{a.name}"
        self.classes = {n.name: n for n in self.tree.body if isinstance(n, ast.ClassDef)}
        self._overrides: list[tuple[int, str, str]] | None = None


@functools.cache
def modules() -> dict[str, _Module]:
    """The project's modules by name, parsed once, when a test first asks (not at collection)."""
    return {m.name: m for m in map(_Module, _modules())}


def _origin(module: _Module, expr: ast.expr) -> str | None:
    """The dotted name an expression (``App``, ``textual.app.App``, ``App[int]``) refers to."""
    if isinstance(expr, ast.Subscript):
        return _origin(module, expr.value)
    if isinstance(expr, ast.Name):
        if expr.id in module.classes:
            return f"{module.name}.{expr.id}"
        return module.imports.get(expr.id)
    if isinstance(expr, ast.Attribute):
        base = _origin(module, expr.value)
        return f"{base}.{expr.attr}" if base else None
    return None


def _dependency_bases(module: _Module, cls: ast.ClassDef, seen: frozenset[str] = frozenset()) -> Iterator[str]:
    """The dotted names of the dependency classes ``cls`` inherits from (through the project's)."""
    for base in cls.bases:
        origin = _origin(module, base)
        if origin is None or origin in seen:
            continue
        owner, _, name = origin.rpartition(".")
        if _own(origin):
            target = modules().get(owner)
            if target is not None and name in target.classes:
                yield from _dependency_bases(target, target.classes[name], seen | {origin})
        else:
            yield origin


def _dependency_has(origin: str, name: str) -> bool:
    module, _, attr = origin.rpartition(".")
    if module.split(".", 1)[0] in NOT_IMPORTED or not module:
        return False
    try:
        return hasattr(getattr(importlib.import_module(module), attr), name)
    except (ImportError, AttributeError):
        return False


def _calls_super(fn: ast.AST, name: str) -> bool:
    return any(
        isinstance(n, ast.Attribute)
        and n.attr == name
        and isinstance(n.value, ast.Call)
        and isinstance(n.value.func, ast.Name)
        and n.value.func.id == "super"
        for n in ast.walk(fn)
    )


def _class_members(cls: ast.ClassDef) -> Iterator[tuple[int, str, ast.AST]]:
    """Private names a class body defines: methods, class attributes, ``self._x = …`` in its methods."""
    for node in cls.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if _private(node.name):
                yield node.lineno, node.name, node
            for n in ast.walk(node):
                if (
                    isinstance(n, ast.Attribute)
                    and isinstance(n.ctx, ast.Store)
                    and _private(n.attr)
                    and isinstance(n.value, ast.Name)
                    and n.value.id == "self"
                ):
                    yield n.lineno, n.attr, n
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                if isinstance(target, ast.Name) and _private(target.id):
                    yield node.lineno, target.id, node


def _overrides(module: _Module) -> list[tuple[int, str, str]]:
    """(line, name, base) for each private name a class defines that a dependency base has."""
    if module._overrides is None:
        module._overrides = []
        for cls in (n for n in module.nodes if isinstance(n, ast.ClassDef)):
            bases = list(_dependency_bases(module, cls))
            for line, name, _node in _class_members(cls) if bases else ():
                module._overrides.extend((line, name, base) for base in bases if _dependency_has(base, name))
    return module._overrides


def _own_names() -> set[str]:
    """Private names the project defines (not overrides of a dependency's)."""
    names: set[str] = set()
    for module in modules().values():
        overridden = {(line, name) for line, name, _ in _overrides(module)}
        for node in module.nodes:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                if (
                    _private(node.name)
                    and (node.lineno, node.name) not in overridden
                    and not _calls_super(node, node.name)
                ):
                    names.add(node.name)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
            elif (
                isinstance(node, ast.Attribute)
                and isinstance(node.ctx, ast.Store)
                and isinstance(node.value, ast.Name)
                and node.value.id in ("self", "cls")
                and (node.lineno, node.attr) not in overridden
            ):
                names.add(node.attr)
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                names.add(node.target.id)
            elif isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "__slots__" for t in node.targets
            ):
                names.update(
                    c.value for c in ast.walk(node.value) if isinstance(c, ast.Constant) and isinstance(c.value, str)
                )
    return {n for n in names if _private(n)}


@functools.cache
def own_names() -> frozenset[str]:
    """``_own_names``, once."""
    return frozenset(_own_names())


def _annotations(module: _Module) -> Iterator[ast.expr]:
    """Quoted annotations, parsed (unquoted ones are walked with the rest of the tree)."""
    for node in module.nodes:
        found: list[ast.expr | None] = []
        if isinstance(node, ast.arg):
            found.append(node.annotation)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            found.append(node.returns)
        elif isinstance(node, ast.AnnAssign):
            found.append(node.annotation)
        for expr in found:
            if isinstance(expr, ast.Constant) and isinstance(expr.value, str):
                try:
                    parsed = ast.parse(expr.value, mode="eval").body
                except SyntaxError:
                    continue
                for n in ast.walk(parsed):
                    ast.copy_location(n, expr)
                yield parsed


def _root(module: _Module, expr: ast.expr) -> str | None:
    """The module an attribute chain starts from (``os`` in ``os.path._x``), if it is one."""
    while isinstance(expr, ast.Attribute):
        expr = expr.value
    return module.imports.get(expr.id) if isinstance(expr, ast.Name) else None


def uses(module: _Module) -> list[str]:
    """Every private-API use of a dependency in ``module``, as 'path:line what'."""
    out: list[str] = []

    def say(node: ast.stmt | ast.expr, what: str) -> None:
        out.append(f"{module.rel}:{node.lineno} {what}")

    for node in module.nodes:
        if isinstance(node, ast.Import):
            for a in node.names:
                if not _own(a.name) and any(_private(p) for p in a.name.split(".")):
                    say(node, f"import {a.name}")
        elif isinstance(node, ast.ImportFrom) and not node.level and not _own(node.module or ""):
            if any(_private(p) for p in (node.module or "").split(".")):
                say(node, f"from {node.module} import …")
            for a in node.names:
                if _private(a.name):
                    say(node, f"from {node.module} import {a.name}")
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("getattr", "setattr", "hasattr", "delattr")
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str)
            and _private(node.args[1].value)
            and node.args[1].value not in own_names()
        ):
            say(node, f"{node.func.id}(…, {node.args[1].value!r})")
    for nodes in [module.nodes, *(list(ast.walk(a)) for a in _annotations(module))]:
        for node in nodes:
            if isinstance(node, ast.Attribute) and _private(node.attr):
                root = _root(module, node.value)
                if root is not None and (root, node.attr) in PUBLIC:
                    continue
                if root is not None and not _own(root):
                    say(node, f"{ast.unparse(node)} (of {root})")
                elif node.attr not in own_names():
                    say(node, ast.unparse(node))
    for line, name, base in _overrides(module):
        out.append(f"{module.rel}:{line} {name} overrides {base}.{name}")
    return sorted(set(out))


def test_no_private_api_of_a_dependency_outside_the_adapters() -> None:
    found = [u for m in modules().values() if m.rel not in ADAPTERS for u in uses(m)]
    assert found == [], (
        "private APIs of dependencies outside the adapters (use the public API, or move "
        "the use into an adapter of tests/test_private_apis.py's ADAPTERS):\n" + "\n".join(found)
    )


@pytest.mark.parametrize("path", sorted(ADAPTERS))
def test_each_adapter_exists_and_still_needs_its_place(path: str) -> None:
    module = next((m for m in modules().values() if m.rel == path), None)
    assert module is not None, f"{path} is gone: take it off ADAPTERS"
    assert uses(module), f"{path} uses no private API any more: take it off ADAPTERS"
    assert ast.get_docstring(module.tree), f"{path} says why it needs private APIs, in its docstring"


@pytest.mark.parametrize(
    "source, expected",
    [
        ("import warnings\nwarnings._filters_mutated()", "warnings._filters_mutated (of warnings)"),
        ("import torch._inductor.config as c", "import torch._inductor.config"),
        ("from textual._styles_cache import StylesCache", "from textual._styles_cache import …"),
        ("def f(parser):\n    return parser._actions", "parser._actions"),
        ("def f(img):\n    return img._typed_storage()", "img._typed_storage"),
        ("def f(x):\n    return getattr(x, '_workers', ())", "getattr(…, '_workers')"),
        ("import os\ndef f(e: 'os._Environ[str]') -> None: ...", "os._Environ (of os)"),
        (
            "from textual.app import App\nclass A(App):\n    def _handle_exception(self, e):\n        pass",
            "_handle_exception overrides textual.app.App._handle_exception",
        ),
        (
            "from textual_plotext import PlotextPlot\nclass P(PlotextPlot):\n"
            "    def f(self):\n        return self._plot",
            "self._plot",
        ),
    ],
)
def test_the_scan_finds_the_forms_private_apis_take(source: str, expected: str) -> None:
    module = _Module(ROOT / "gpudash" / "_private_api_probe.py", source)  # a path in the package: not read
    assert any(u.endswith(expected) for u in uses(module)), uses(module)


def test_the_projects_own_private_names_and_documented_ones_are_not_uses() -> None:
    source = (
        "import os\nfrom workloads.base import Workload\n"
        "class W(Workload):\n    def _release(self):\n        super()._release()\n"
        "def f(k):\n    os._exit(0)\n    return k._items\n"
    )
    assert uses(_Module(ROOT / "workloads" / "_private_api_probe.py", source)) == []
