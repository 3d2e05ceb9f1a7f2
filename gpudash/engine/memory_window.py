"""A family's steps recorded with the CUDA caching allocator's history (the dashboard's key, ``gpudash
diagnose --memory -w …``): ``steps`` steps between two sample windows, then the lines alive at their
peak (``gpudash.diagnosis.memory_peak``) in a "measured" event. The recorded steps are slower (a
Python stack an allocation) and stay out of every sample. Torch is the loop's."""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING

from gpudash.core import allocator_history as history
from gpudash.core.protocol import MEMORY_PEAK, EventKind
from gpudash.diagnosis.memory_peak import peak_of
from gpudash.engine.events import one_line

if TYPE_CHECKING:  # pragma: no cover
    from gpudash.engine.loop_state import LoopState as StepLoop

MAX_STEPS = 5


def memory_peak(loop: StepLoop, steps: int) -> None:
    """Record ``steps`` steps' allocations; a "measured" event with the lines at their peak, or an
    error event saying why not (the run goes on)."""
    w, torch = loop.workload, loop.torch
    if not w.on_cuda:
        loop.event(EventKind.ERROR, what=MEMORY_PEAK, message="the allocator's history needs CUDA (its caching "
                   "allocator keeps it); this run is on the CPU", details=loop.config())  # fmt: skip
        return
    steps = max(1, min(MAX_STEPS, steps))
    loop.settle()
    try:
        start = time.perf_counter()
        history.start(torch)
        try:
            for _ in range(steps):
                w.step()
            w.drain()
            wall_ms = (time.perf_counter() - start) * 1e3
            snapshot = history.snapshot(torch)
        finally:
            history.stop(torch)
        index = w.device.index
        peak = peak_of(snapshot, index if index is not None else torch.cuda.current_device(), history.MAX_ENTRIES)
    except Exception as exc:  # noqa: BLE001 - a recording that fails must not end the run
        loop.count_steps_apart(steps)
        loop.restart_window()
        loop.event(EventKind.ERROR, what=MEMORY_PEAK, message=f"the allocator's history: {one_line(exc)}",
                   details=loop.config())  # fmt: skip
        return
    loop.count_steps_apart(steps)
    loop.restart_window()
    cost = f"{steps} steps recorded, {wall_ms / steps:.3g} ms a step"
    details = {**loop.config(), "memory_peak": json.dumps(peak.as_dict()), "lines": "\n".join(peak.lines())}
    loop.event(EventKind.MEASURED, what=MEMORY_PEAK, message=f"{peak.summary()}; {cost}", details=details)
