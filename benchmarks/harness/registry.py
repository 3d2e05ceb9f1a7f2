"""Every declared case, by name: each module of ``benchmarks/cases/`` that declares ``CASES`` (a
module without it is shared measuring code). Importing a case module imports nothing heavy."""

from __future__ import annotations

import importlib
import pkgutil
from functools import cache

from benchmarks.harness.case import BadParameter, Case

PACKAGE = "benchmarks.cases"


@cache
def cases() -> dict[str, Case]:
    """The cases by name, in name order; two of one name are refused."""
    package = importlib.import_module(PACKAGE)
    found: dict[str, Case] = {}
    for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda m: m.name):
        if info.ispkg:
            continue
        module = importlib.import_module(f"{PACKAGE}.{info.name}")
        for case in getattr(module, "CASES", ()):
            if case.name in found:
                raise ValueError(f"two cases named {case.name}")
            found[case.name] = case
    return dict(sorted(found.items()))


def tagged(tag: str) -> list[Case]:
    return [c for c in cases().values() if tag in c.tags]


def named(name: str) -> Case:
    """The case ``name``; a name that is none says which there are."""
    try:
        return cases()[name]
    except KeyError:
        raise BadParameter(f"no case {name!r}; `python -m benchmarks list` names them") from None
