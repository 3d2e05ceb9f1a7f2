"""Profiler windows in the workload process: run N steps under ``torch.profiler``, write the
Chrome trace (``.json.gz``: Perfetto and TensorBoard's profiler plugin load it), compute its
figures (``gpudash.engine.trace_figures``), keep the directory bounded. Torch comes in as an argument.
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpudash.engine.trace_figures import STAGE_PREFIX, STEP_MARKER, TraceFigures, figures, read_events

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
    """``steps`` steps of ``workload`` under the profiler (CPU, and CUDA on a GPU), kept as a
    compressed trace in ``trace_dir`` (the ``keep`` newest stay); the trace's path and its figures."""
    directory = Path(trace_dir)
    directory.mkdir(parents=True, exist_ok=True)
    prof, wall_ms = _profiled(torch, workload, steps)
    path = directory / trace_name(workload, at_s)
    prof.export_chrome_trace(str(path))
    result = figures(read_events(path), steps, wall_ms)
    prune(directory, keep)
    return path, result


def window_figures(torch: Any, workload: Workload, steps: int) -> TraceFigures:
    """The figures of ``steps`` steps under the profiler, the trace not kept: it goes to a scratch
    file uncompressed (compressing a ResNet-50 window's trace took about 2 s of a diagnosis on an
    H100 host; writing it plain, a tenth of that)."""
    import tempfile

    prof, wall_ms = _profiled(torch, workload, steps)
    with tempfile.TemporaryDirectory(prefix="gpudash-diagnosis-") as scratch:
        path = Path(scratch) / "window.json"
        prof.export_chrome_trace(str(path))
        return figures(read_events(path), steps, wall_ms)


def _profiled(torch: Any, workload: Workload, steps: int) -> tuple[Any, float]:
    """``steps`` steps (drained) under the profiler, each inside a ``STEP_MARKER`` range (the host's
    enqueue of that step: busy and idle are measured over the span they open): the profiler and the
    window's wall ms."""
    activities = [torch.profiler.ProfilerActivity.CPU]
    if workload.on_cuda:
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    start = time.perf_counter()
    workload.annotate_stages = STAGE_PREFIX  # whose kernels are whose: the stages' GPU times
    try:
        with torch.profiler.profile(activities=activities) as prof:
            for _ in range(steps):
                with torch.profiler.record_function(STEP_MARKER):
                    workload.step()
            workload.drain()
    finally:
        workload.annotate_stages = None
    return prof, (time.perf_counter() - start) * 1000.0
