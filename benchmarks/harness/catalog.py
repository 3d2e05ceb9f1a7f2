"""The catalog of the benchmarks' claims, ``benchmarks/catalog.toml``, typed: a ``Case`` a table.

Each table is a case by its name: its title, claim, doc anchor and what it measures (all four
required), its arms, schedule, tags, tiny parameters and stamp's device, and where its code is when
not in the module of its name (``module``, ``measure``, ``params``). A key missing or unknown, or
a value that is none of its kind's (a tag, a schedule, an arm's kind), is refused with the case's
name. Reading it imports no case's module."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from benchmarks.harness.case import Arm, ArmKind, Case
from benchmarks.harness.schedule import Schedule

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

CATALOG = Path(__file__).resolve().parents[1] / "catalog.toml"
PACKAGE = "benchmarks.cases"  # the case modules' package
REQUIRED = ("title", "claim", "anchor", "measures")
OPTIONAL = ("arms", "schedule", "tags", "tiny", "device", "module", "measure", "params")


def read(path: Path = CATALOG) -> dict[str, Case]:
    """Every case of the catalog, by name, in the catalog's order."""
    with path.open("rb") as f:
        tables = tomllib.load(f)
    return {name: typed(name, table) for name, table in tables.items()}


def typed(name: str, table: dict[str, Any]) -> Case:
    """One table of the catalog as a ``Case``."""
    missing = [k for k in REQUIRED if k not in table]
    unknown = sorted(set(table) - set(REQUIRED) - set(OPTIONAL))
    if missing or unknown:
        raise ValueError(f"catalog: case {name}: keys missing {missing}, keys unknown {unknown}")
    try:
        arms = tuple(arm(a) for a in table.get("arms", ()))
        schedule = Schedule(table.get("schedule", Schedule.ONCE.value))
    except (KeyError, TypeError, ValueError) as error:
        raise ValueError(f"catalog: case {name}: {error!r}") from None
    return Case(
        name=name,
        title=table["title"],
        claim=table["claim"],
        anchor=table["anchor"],
        measures=table["measures"],
        module=f"{PACKAGE}.{table.get('module', name)}",
        arms=arms,
        schedule=schedule,
        tags=frozenset(table.get("tags", ())),
        tiny={k: tuple(v) if isinstance(v, list) else v for k, v in table.get("tiny", {}).items()},
        device=table.get("device"),
        measure_name=table.get("measure", "measure"),
        params_name=table.get("params", "Params"),
    )


def arm(declared: str | dict[str, str]) -> Arm:
    """An arm: a name (in the harness's process), or ``{ name, kind }``."""
    if isinstance(declared, str):
        return Arm(declared)
    return Arm(declared["name"], ArmKind(declared["kind"]))
