"""A rank's step split from a profiler window (``ddp_bare``): per step, the wall time, the compute
kernels' busy time, the all-reduce's and its exposed part, read as gpudash reads a trace."""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable
from typing import Any


def trace_split(
    torch: Any, step: Callable[[], None], sync: Callable[[], None], steps: int, cuda: bool
) -> tuple[float, float, float, float]:
    """Per step, from a profiler window: (step ms, compute kernels ms, all-reduce ms, its exposed ms)."""
    from torch.profiler import ProfilerActivity, profile

    from gpudash.engine.collectives import is_collective
    from gpudash.engine.intervals import length, union
    from gpudash.engine.trace_figures import STEP_MARKER, figures, read_events

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    sync()
    start = time.perf_counter()
    with profile(activities=activities) as prof:
        for _ in range(steps):
            with torch.autograd.profiler.record_function(STEP_MARKER):  # the steps' span, as gpudash marks it
                step()
        sync()
    wall_ms = (time.perf_counter() - start) * 1e3 / steps
    if not cuda:
        return wall_ms, 0.0, 0.0, 0.0
    with tempfile.TemporaryDirectory() as scratch:
        path = os.path.join(scratch, "trace.json")
        prof.export_chrome_trace(path)
        events = read_events(path)
    fig = figures(events, steps, wall_ms * steps)  # the collectives and their exposed part, as gpudash reads them
    kernels = (e for e in events if e.get("cat") == "kernel" and not is_collective(str(e.get("name"))))
    compute = union((float(e["ts"]), float(e["ts"]) + float(e["dur"])) for e in kernels)
    return wall_ms, length(compute) / 1e3 / steps, fig.comm_ms_per_step or 0.0, fig.comm_exposed_ms_per_step or 0.0
