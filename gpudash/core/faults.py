"""Fault injection for tests: ``GPUDASH_FAULT=KIND@POINT=N`` makes one thing fail on purpose.

Test-only. Unset (the normal case), every hook is a ``None`` check. One fault per run; the
workload process reads it when it starts (so a restarted one fails again), each rank of a
data-parallel run too (each counts its own steps), the parent when its runner, NVML sampler or
recorder is made. The forms (``FORMS`` is the table):

=============================  ===============================================================
``raise@step=N``               the workload process raises ``InjectedFault`` at its N-th step
``hang@step=N``                the workload process stops at its N-th step and never answers
``exit@reconfigure[=N]``       the workload process exits (code 3) in the middle of its N-th
                               reconfiguration (default the first): after draining, before
                               rebuilding
``nvml-lost@sample=N``         from the parent's N-th NVML sample on, every pynvml call raises
                               ``NVMLError_GpuIsLost`` (the GPU fell off the bus)
``nvml-gone@sample=N``         ... raises ``NVMLError_DriverNotLoaded`` (the driver went away)
``slow-parent@sample=N[,for=S]``  after the N-th workload sample the parent stops reading the
                               workload's messages until their queue is full, and S seconds
                               more (default 1): the workload process drops samples meanwhile
``csv-write@row=N``            writing the N-th CSV data row fails (EIO), as a failing disk would
=============================  ===============================================================

A value that is not one of these is a ``FaultSpecError`` (``gpudash`` says so in one line
and exits 2). Torch-free and Textual-free.
"""

from __future__ import annotations

import errno
import os
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

ENV = "GPUDASH_FAULT"
EXIT_CODE = 3  # the workload process's exit status for exit@reconfigure
DEFAULT_SLOW_PARENT_S = 1.0
GPU_IS_LOST = 15  # NVML return codes (nvml.h)
DRIVER_NOT_LOADED = 9


@dataclass(frozen=True)
class FaultForm:
    """One kind of fault: where it is counted and whether N may be left out."""

    kind: str
    point: str  # what N counts: step, reconfigure, sample, row
    where: str  # "workload" (the child) or "parent"
    default_n: int | None = None  # None: N is required
    takes_for: bool = False  # accepts ",for=S"

    @property
    def example(self) -> str:
        n = f"[={self.default_n}]" if self.default_n is not None else "=N"
        return f"{self.kind}@{self.point}{n}" + (",for=S" if self.takes_for else "")


FORMS: dict[str, FaultForm] = {
    f.kind: f
    for f in (
        FaultForm("raise", "step", "workload"),
        FaultForm("hang", "step", "workload"),
        FaultForm("exit", "reconfigure", "workload", default_n=1),
        FaultForm("nvml-lost", "sample", "parent"),
        FaultForm("nvml-gone", "sample", "parent"),
        FaultForm("slow-parent", "sample", "parent", takes_for=True),
        FaultForm("csv-write", "row", "parent"),
    )
}


class FaultSpecError(ValueError):
    """``GPUDASH_FAULT`` holds something that is not a fault."""


class InjectedFault(RuntimeError):
    """The exception ``raise@step=N`` raises in the workload process."""


@dataclass(frozen=True)
class Fault:
    """One parsed fault: ``kind`` fires at the ``n``-th ``point``; ``for_s`` for slow-parent."""

    kind: str
    n: int
    for_s: float = DEFAULT_SLOW_PARENT_S

    def __str__(self) -> str:
        form = FORMS[self.kind]
        extra = f",for={self.for_s:g}" if form.takes_for else ""
        return f"{self.kind}@{form.point}={self.n}{extra}"

    # -- the workload process (gpudash.engine.loop, reconfigure) --------------------------------------
    def before_step(self, step: int) -> None:
        """Called before the workload process's ``step``-th step (1-based)."""
        if step != self.n:
            return
        if self.kind == "raise":
            raise InjectedFault(f"injected fault: raise at step {step} ({ENV}={self})")
        if self.kind == "hang":
            _say(f"hanging at step {step} ({ENV}={self})")
            while True:  # the main thread never comes back; the parent's watchdog notices
                time.sleep(60)

    def reconfiguring(self, count: int, what: str) -> None:
        """Called in the middle of the workload process's ``count``-th reconfiguration."""
        if self.kind == "exit" and count == self.n:
            _say(f"exiting during reconfiguration {count} ({what}) ({ENV}={self})")
            os._exit(EXIT_CODE)  # no event, no cleanup: as a process killed mid-change would

    # -- the parent ------------------------------------------------------------------------------
    def fails_row(self, row: int) -> OSError | None:
        """The error writing CSV data row ``row`` (1-based) meets, or None."""
        if self.kind == "csv-write" and row == self.n:
            return OSError(errno.EIO, f"{os.strerror(errno.EIO)} (injected: {ENV}={self})")
        return None

    def nvml_error_code(self, sample: int) -> int | None:
        """The NVML error every pynvml call raises from NVML sample ``sample`` on, or None."""
        if sample < self.n:
            return None
        return {"nvml-lost": GPU_IS_LOST, "nvml-gone": DRIVER_NOT_LOADED}.get(self.kind)


def parse(text: str | None) -> Fault | None:
    """``raise@step=5`` → ``Fault("raise", 5)``; empty or None → None; anything else raises
    ``FaultSpecError`` with one line naming the accepted forms."""
    if text is None or not text.strip():
        return None
    spec = text.strip()
    head, _, rest = spec.partition(",")
    kind, at, point_n = head.partition("@")
    form = FORMS.get(kind.strip())
    if form is None:
        raise FaultSpecError(_bad(spec, f"unknown fault {kind.strip()!r}"))
    point, eq, n_text = point_n.partition("=")
    if not at or point.strip() != form.point:
        raise FaultSpecError(_bad(spec, f"{form.kind} takes @{form.point}: {form.example}"))
    if eq:
        n = _positive_int(n_text, spec, form)
    elif form.default_n is not None:
        n = form.default_n
    else:
        raise FaultSpecError(_bad(spec, f"{form.kind} needs a count: {form.example}"))
    for_s = DEFAULT_SLOW_PARENT_S
    if rest:
        key, _, value = rest.partition("=")
        if not form.takes_for or key.strip() != "for":
            raise FaultSpecError(_bad(spec, f"unexpected {rest!r}: {form.example}"))
        for_s = _positive_float(value, spec, form)
    return Fault(form.kind, n, for_s)


def from_env(environ: Mapping[str, str] | None = None) -> Fault | None:
    """The fault ``GPUDASH_FAULT`` names, or None; raises ``FaultSpecError`` on a bad value."""
    return parse((os.environ if environ is None else environ).get(ENV))


def for_workload(fault: Fault | None) -> Fault | None:
    """``fault`` when the workload process is where it fires, else None."""
    return fault if fault is not None and FORMS[fault.kind].where == "workload" else None


def of_kind(*kinds: str) -> Fault | None:
    """The environment's fault when it is one of ``kinds`` (parent-side hooks), else None."""
    fault = from_env()
    return fault if fault is not None and fault.kind in kinds else None


class ParentPause:
    """``slow-parent``: once ``n`` samples came, the parent leaves the queue unread until it is
    full (however fast the workload runs), then ``for_s`` seconds more."""

    def __init__(self, fault: Fault, clock: Callable[[], float] = time.monotonic) -> None:
        self.fault = fault
        self.clock = clock
        self.began = False
        self.until: float | None = None  # set when the queue is full

    def paused(self, samples_seen: int, queue_full: bool) -> bool:
        """Whether the parent should leave the queue unread now."""
        if not self.began:
            if samples_seen < self.fault.n:
                return False
            self.began = True
            _say(
                f"the parent stops reading until the queue is full, then {self.fault.for_s:g} s more "
                f"({ENV}={self.fault})"
            )
        if self.until is None:
            if not queue_full:
                return True
            self.until = self.clock() + self.fault.for_s
        return self.clock() < self.until


class FaultyNvml:
    """``pynvml`` as the sampler sees it under nvml-lost/nvml-gone: every ``nvml*`` call raises
    the module's own ``NVMLError(code)`` once ``samples()`` has reached the fault's N."""

    def __init__(self, module: Any, fault: Fault, samples: Callable[[], int]) -> None:
        self._module = module
        self._fault = fault
        self._samples = samples

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._module, name)
        if not (callable(value) and name.startswith("nvml") and name != "nvmlShutdown"):
            return value

        def call(*args: Any, **kwargs: Any) -> Any:
            code = self._fault.nvml_error_code(self._samples())
            if code is not None:
                raise self._module.NVMLError(code)
            return value(*args, **kwargs)

        return call


def _say(text: str) -> None:
    print(f"gpudash fault injection: {text}", file=sys.stderr, flush=True)


def _bad(spec: str, why: str) -> str:
    forms = ", ".join(f.example for f in FORMS.values())
    return f"{ENV}={spec!r}: {why} (forms: {forms})"


def _positive_int(text: str, spec: str, form: FaultForm) -> int:
    try:
        n = int(text.strip())
    except ValueError:
        n = 0
    if n < 1:
        raise FaultSpecError(_bad(spec, f"{form.point} must be a whole number ≥ 1, not {text.strip()!r}"))
    return n


def _positive_float(text: str, spec: str, form: FaultForm) -> float:
    try:
        value = float(text.strip().removesuffix("s"))
    except ValueError:
        value = 0.0
    if not value > 0 or value == float("inf"):
        raise FaultSpecError(_bad(spec, f"for must be a number of seconds > 0, not {text.strip()!r}"))
    return value
