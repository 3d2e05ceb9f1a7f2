"""The host's time outside torch in a window's steps: the stretches of a step (its ``gpudash.step``
marker on the host) in which no thread of the process ran a torch operator or a CUDA call, each
``GAP_US`` or longer — a sleep, a file or network read, logging, the script's own Python of a
millisecond or more. A launch-bound step's gaps between operators are microseconds (the Python
between two launches); these are not. Read from a window that records the host's operators (a
kernels-only window has no markers: None). Torch-free."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

from gpudash.engine.intervals import Interval, clip, event_interval, length, minus, union

GAP_US = 1000.0  # a stretch of a step with nothing of torch's on the host this long or longer counts
HOST_CATEGORIES = ("cpu_op", "cuda_runtime", "cuda_driver")  # torch's operators and its CUDA calls, any thread


def host_gaps_ms_per_step(events: Sequence[dict[str, Any]], marks: Sequence[Interval]) -> float | None:
    """The median over the steps (``marks``, µs) of the time in stretches of ``GAP_US`` or more with
    no torch operator nor CUDA call on any thread, ms; None without markers or without any host event
    (the host's operators not recorded)."""
    busy = union(event_interval(e) for e in events if e.get("cat") in HOST_CATEGORIES and _timed(e))
    if not marks or not busy:
        return None
    per_step = []
    for mark in marks:
        free = minus(mark, clip(busy, mark))
        per_step.append(length([(a, b) for a, b in free if b - a >= GAP_US]))
    return statistics.median(per_step) / 1000.0


def _timed(e: dict[str, Any]) -> bool:
    try:
        return float(e["dur"]) >= 0.0 and float(e["ts"]) == float(e["ts"])
    except (KeyError, TypeError, ValueError):
        return False
