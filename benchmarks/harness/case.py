"""A benchmark case: its name, the claim it backs and where the docs make it, its tags, its arms
and their schedule, what it measures, and where its measuring code is (its parameters and its
measuring function, in a module of ``benchmarks/cases/``).

``benchmarks/catalog.toml`` declares every case (``harness.catalog`` reads it); a case's module is
imported when its code is first asked for, so ``python -m benchmarks list`` never loads torch."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING, Any

from benchmarks.harness.schedule import Schedule

if TYPE_CHECKING:
    from benchmarks.harness.context import Run

TAGS = {
    "tiny": "runs in seconds on a CPU with its tiny parameters (CI runs every one)",
    "gpu": "its real run needs a CUDA GPU",
    "multigpu": "its real run needs two or more GPUs",
    "probe": "a one-off whose output docs/bench keeps; not re-run as the code changes",
}


class Unavailable(Exception):
    """The case cannot run here (no CUDA, too few GPUs, a tool missing): why, for its user."""


class BadParameter(ValueError):
    """A case or a parameter the command line gave that cannot be: why, for its user (exit 2)."""


class ArmKind(str, Enum):
    """What an arm is."""

    IN_PROCESS = "in-process"  # a callable in the harness's process
    COMMAND = "command"  # a shell command (a user's script, a job)
    GPUDASH = "gpudash"  # a gpudash command (record, sweep, tune, diagnose)
    CHECKOUT = "checkout"  # the same measure run from another checkout of gpudash

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class Arm:
    """One side of a comparison: its name and what it is."""

    name: str
    kind: ArmKind = ArmKind.IN_PROCESS

    def __str__(self) -> str:
        return f"{self.name} ({self.kind})"


@dataclass(frozen=True)
class Case:
    """A benchmark case.

    ``anchor``: the doc heading the claim is made under, ``FILE#heading-slug`` (a test checks that
    it exists). ``tiny``: the parameters' values that make a seconds-long CPU run (a case tagged
    ``tiny`` has some). ``device``: the device its result's stamp names where the case decides it
    (None: its parameters' ``device``). Its code, in ``module`` (imported when first asked for):
    ``params``, a dataclass of the case's parameters and their defaults, and ``run``, which
    measures, writing its tables, lines and figures to the ``Run`` it is given."""

    name: str
    title: str
    claim: str
    anchor: str
    measures: str
    module: str
    arms: tuple[Arm, ...] = ()
    schedule: Schedule = Schedule.ONCE
    tags: frozenset[str] = frozenset()
    tiny: Mapping[str, object] = field(default_factory=dict)
    device: str | None = None
    measure_name: str = "measure"  # the names of its code in its module
    params_name: str = "Params"

    def __post_init__(self) -> None:
        unknown = set(self.tags) - set(TAGS)
        if unknown:
            raise ValueError(f"case {self.name}: unknown tags {sorted(unknown)}")
        if "#" not in self.anchor:
            raise ValueError(f"case {self.name}: its anchor {self.anchor!r} is not FILE#heading")
        if "tiny" in self.tags and not self.tiny:
            raise ValueError(f"case {self.name}: tagged tiny without tiny parameters")

    @property
    def run(self) -> Callable[[Run, Any], None]:
        """Its measuring function."""
        measure: Callable[[Run, Any], None] = getattr(importlib.import_module(self.module), self.measure_name)
        return measure

    @property
    def params(self) -> type:
        """The dataclass of its parameters."""
        params: type = getattr(importlib.import_module(self.module), self.params_name)
        return params

    def stamp_device(self, params: Any) -> str:
        """The device its result's stamp names ("auto": the machine's GPUs where it has any, else its CPU)."""
        return self.device or str(getattr(params, "device", "auto"))
