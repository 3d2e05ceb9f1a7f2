"""Naming a workload of the user's own, and what it declares, without running it (torch-free).

A workload of your own is named ``FILE.py:FUNCTION``, ``package.module:FUNCTION``, or by an entry
point in the group ``gpudash.workloads`` (an installed package's ``name = "package.module:FUNCTION"``).
Its optional ``@gpudash.api.workload(name=..., batch_size=..., cpu_batch_size=...)`` is read here
from the file's text (``ast``), so the parent process knows the defaults before the workload
process imports torch and the file; the values must therefore be literals.
"""

from __future__ import annotations

import ast
import importlib.machinery
import os
import sys
from dataclasses import dataclass
from importlib import metadata

ENTRY_POINT_GROUP = "gpudash.workloads"


class SpecError(ValueError):
    """A workload of the user's own that cannot be named or read: one line for the user."""


@dataclass(frozen=True)
class Declared:
    """What ``@gpudash.api.workload(...)`` says of a function (None: not said)."""

    name: str | None = None
    batch_size: int | None = None
    cpu_batch_size: int | None = None


def is_user_spec(name: str) -> bool:
    """``name`` has the form ``FILE.py:FUNCTION`` or ``package.module:FUNCTION`` (nothing is read)."""
    source, _, function = name.rpartition(":")
    if not source or not function.isidentifier():
        return False
    return source.endswith(".py") or all(part.isidentifier() for part in source.split("."))


def entry_points() -> dict[str, str]:
    """Installed workloads: entry point name → ``package.module:FUNCTION`` (group ``gpudash.workloads``)."""
    return {ep.name: ep.value for ep in metadata.entry_points(group=ENTRY_POINT_GROUP)}


def search_path() -> list[str]:
    """Where a ``package.module`` of the user's own is looked for: the current directory first,
    as ``python -m`` does, then ``sys.path`` (the ``gpudash`` script's own path lacks the former)."""
    cwd = os.getcwd()
    return [cwd, *(p for p in sys.path if p and os.path.abspath(p) != cwd)]


def source_file(spec: str) -> str:
    """The Python file a spec names: the file itself, or the module's, found on ``search_path()``
    without importing anything (a package's ``__init__`` is not run)."""
    source = spec.rpartition(":")[0]
    if source.endswith(".py"):
        if not os.path.isfile(source):
            raise SpecError(f"{spec!r}: no such file {source!r}")
        return source
    search: list[str] | None = search_path()
    found = None
    for part in source.split("."):
        found = importlib.machinery.PathFinder.find_spec(part, search)
        if found is None:
            raise SpecError(f"{spec!r}: no module {source!r} on the Python path")
        search = list(found.submodule_search_locations or [])
    if found is None or not found.origin or not found.origin.endswith(".py"):
        raise SpecError(f"{spec!r}: {source!r} is not a Python source file gpudash can read")
    return found.origin


def declared(spec: str, path: str | None = None) -> Declared:
    """What the function's ``@workload(...)`` declares, read from its source (``path``: the file,
    when already found); ``Declared()`` without one. A value that is not a literal, or of the
    wrong type, is a one-line SpecError."""
    path = path if path is not None else source_file(spec)
    function = spec.rpartition(":")[2]
    try:
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read(), filename=path)
    except (OSError, UnicodeDecodeError) as exc:
        raise SpecError(f"{spec!r}: cannot read {path}: {exc}") from None
    except SyntaxError as exc:
        raise SpecError(f"{spec!r}: line {exc.lineno}: {exc.msg}") from None
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == function:
            for decorator in node.decorator_list:
                if isinstance(decorator, ast.Call) and _called_name(decorator.func) == "workload":
                    return _read_keywords(spec, decorator)
            return Declared()
    return Declared()  # not defined at the top (assigned, imported): the workload process says if it is missing


def _called_name(func: ast.expr) -> str | None:
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return None


def _read_keywords(spec: str, call: ast.Call) -> Declared:
    values: dict[str, object] = {}
    for kw in call.keywords:
        if kw.arg not in Declared.__dataclass_fields__:
            raise SpecError(f"{spec!r}: @workload() takes name, batch_size and cpu_batch_size, not {kw.arg}")
        try:
            values[kw.arg] = ast.literal_eval(kw.value)
        except ValueError:
            raise SpecError(
                f"{spec!r}: @workload({kw.arg}=...) must be a literal (gpudash reads it without running the file)"
            ) from None
    for key in ("batch_size", "cpu_batch_size"):
        n = values.get(key)
        if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n < 1):
            raise SpecError(f"{spec!r}: @workload({key}=...) must be a whole number of at least 1, got {n!r}")
    name = values.get("name")
    if name is not None and (not isinstance(name, str) or not name.strip()):
        raise SpecError(f"{spec!r}: @workload(name=...) must be a non-empty string, got {name!r}")
    return Declared(**values)  # type: ignore[arg-type]  # checked above
