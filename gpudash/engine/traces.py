"""Profiler windows in the workload process: run N steps under ``torch.profiler``, write the
Chrome trace (``.json.gz``: Perfetto and TensorBoard's profiler plugin load it), compute its
figures (``gpudash.engine.trace_figures``), keep the directory bounded. Torch comes in as an argument.
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpudash.engine.trace_figures import STAGE_PREFIX, TraceFigures, figures, read_events

if TYPE_CHECKING:  # pragma: no cover
    from workloads.base import Workload

PREFIX = "gpudash-trace-"


def trace_name(workload: Workload, at_s: float) -> str:
    """``gpudash-trace-<date-time>-t<run seconds>-encdec-pipelined-b8[-<knobs>].json.gz``."""
    knobs = (
        "" if not workload.knobs else "-" + re.sub(r"[^A-Za-z0-9_.=-]", "_", workload.knobs.text().replace(",", "+"))
    )
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return (
        f"{PREFIX}{stamp}-t{at_s:08.2f}-{workload.info.name}-{workload.variant}-b{workload.batch_size}{knobs}.json.gz"
    )


def prune(directory: Path, keep: int) -> list[Path]:
    """Delete the oldest traces beyond ``keep``; returns what was deleted."""
    files = sorted(directory.glob(f"{PREFIX}*.json.gz"), key=lambda p: (p.stat().st_mtime_ns, p.name))
    doomed = files[: max(0, len(files) - keep)]
    for path in doomed:
        path.unlink(missing_ok=True)
    return doomed


def profile_window(
    torch: Any, workload: Workload, steps: int, trace_dir: str, at_s: float, keep: int
) -> tuple[Path, TraceFigures]:
    """``steps`` steps of ``workload`` under the profiler (CPU, and CUDA on a GPU); the trace's
    path and its figures."""
    directory = Path(trace_dir)
    directory.mkdir(parents=True, exist_ok=True)
    activities = [torch.profiler.ProfilerActivity.CPU]
    if workload.on_cuda:
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    start = time.perf_counter()
    workload.annotate_stages = STAGE_PREFIX  # whose kernels are whose: the stages' GPU times
    try:
        with torch.profiler.profile(activities=activities) as prof:
            for _ in range(steps):
                workload.step()
            workload.drain()
    finally:
        workload.annotate_stages = None
    wall_ms = (time.perf_counter() - start) * 1000.0
    path = directory / trace_name(workload, at_s)
    prof.export_chrome_trace(str(path))
    result = figures(read_events(path), steps, wall_ms)
    prune(directory, keep)
    return path, result
