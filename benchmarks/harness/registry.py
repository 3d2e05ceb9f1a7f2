"""Every case, by name: the catalog's (``benchmarks/catalog.toml``), each bound to its module of
``benchmarks/cases/``. A catalog entry without its module, or a case module no entry names, is
refused (``benchmarks/cases/shared/`` holds the code several cases share). Listing the cases
imports none of their modules."""

from __future__ import annotations

import importlib
import pkgutil
from functools import cache

from benchmarks.harness.case import BadParameter, Case
from benchmarks.harness.catalog import PACKAGE, read


@cache
def cases() -> dict[str, Case]:
    """The cases by name, in name order."""
    found = read()
    package = importlib.import_module(PACKAGE)
    modules = {f"{PACKAGE}.{m.name}" for m in pkgutil.iter_modules(package.__path__) if not m.ispkg}
    named = {c.module for c in found.values()}
    if modules != named:
        raise ValueError(
            f"benchmarks/catalog.toml: entries without their module {sorted(named - modules)}, "
            f"case modules without an entry {sorted(modules - named)}"
        )
    return dict(sorted(found.items()))


def tagged(tag: str) -> list[Case]:
    return [c for c in cases().values() if tag in c.tags]


def named(name: str) -> Case:
    """The case ``name``; a name that is none says which there are."""
    try:
        return cases()[name]
    except KeyError:
        raise BadParameter(f"no case {name!r}; `python -m benchmarks list` names them") from None
