"""A profiler window's Chrome trace read within a memory bound: streamed, an event at a time, and
only what the window's figures use (``gpudash.engine.trace_figures``: device activity, the host's
step and stage ranges, kernel launches; in a window without device activity, a CPU job's, the
host's operators), each event slimmed to the keys they read.

A trace of a step of thousands of small operators runs to hundreds of MB; read whole, it takes
several times that in memory. ``read_bounded`` reads it twice, streaming: first the step markers
and how many events the figures would keep, then the events of as many whole steps as fit in
``max_events`` — a window cut short says so (``BoundedTrace.steps`` < ``steps_in_file``). Torch-free.
"""

from __future__ import annotations

import gzip
import json
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from gpudash.engine.trace_figures import CUDA_CALLS, DEVICE_CATEGORIES, LAUNCH_NAMES, STEP_MARKER, WAIT_NAMES

MAX_EVENTS = 200_000  # the events kept of one window (a few hundred bytes each)
CHUNK = 1 << 20
ARGS_KEPT = ("correlation", "stream")


@dataclass
class BoundedTrace:
    """The kept events, and how many of the window's steps they cover (of those in the file)."""

    events: list[dict[str, Any]] = field(default_factory=list)
    steps: int = 0
    steps_in_file: int = 0

    @property
    def cut_short(self) -> bool:
        return self.steps < self.steps_in_file


def _kept(e: dict[str, Any], host_ops: bool = False) -> bool:
    """Whether the figures read ``e`` (``host_ops``: the host's operators too — a window without
    device activity, a CPU job's, whose time outside torch they tell)."""
    cat = e.get("cat")
    if cat in DEVICE_CATEGORIES or cat == "user_annotation" or (host_ops and cat == "cpu_op"):
        return True
    # the driver's calls too: a compiled model launches its Triton kernels with cuLaunchKernel(Ex)
    return cat in CUDA_CALLS and (e.get("name") in LAUNCH_NAMES or e.get("name") in WAIT_NAMES)


def _slim(e: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {k: e[k] for k in ("cat", "ts", "dur") if k in e}
    out["name"] = sys.intern(str(e.get("name", "?")))
    args = e.get("args")
    if isinstance(args, dict):
        out["args"] = {k: args[k] for k in ARGS_KEPT if k in args}
    return out


def _open(path: str | Path) -> IO[str]:
    if str(path).endswith(".gz"):
        return gzip.open(path, "rt", encoding="utf-8")
    return open(path, encoding="utf-8")


def stream_events(path: str | Path) -> Iterator[dict[str, Any]]:
    """Each object of the trace's ``traceEvents`` array, in file order; ValueError when the file is
    not a Chrome trace."""
    decoder = json.JSONDecoder()
    with _open(path) as f:
        buf, pos, eof = "", 0, False

        def more() -> bool:
            nonlocal buf, pos, eof
            chunk = f.read(CHUNK)
            buf, pos, eof = buf[pos:] + chunk, 0, not chunk
            return bool(chunk)

        while (start := buf.find('"traceEvents"')) < 0:
            buf = buf[-16:]
            if not more():
                raise ValueError("no traceEvents in the trace")
        pos = start + len('"traceEvents"')
        while True:
            while pos < len(buf) and buf[pos] in " \t\r\n:,[":
                pos += 1
            if pos >= len(buf):
                if not more():
                    raise ValueError("the trace ends inside traceEvents")
                continue
            if buf[pos] == "]":
                return
            try:
                event, end = decoder.raw_decode(buf, pos)
            except json.JSONDecodeError:
                if eof or not more():
                    raise ValueError("a trace event that is not JSON") from None
                continue
            pos = end
            if isinstance(event, dict):
                yield event


def read_bounded(path: str | Path, max_events: int = MAX_EVENTS) -> BoundedTrace:
    """The window's events within ``max_events``: all of them, or those before the first step that
    would not fit (whole steps; at least one)."""
    marks: list[float] = []
    kept = host_ops = 0
    device = False  # a GPU's window (its activity, its CUDA calls); else the CPU's
    for e in stream_events(path):
        if _kept(e):
            kept += 1
            if e.get("cat") == "user_annotation" and e.get("name") == STEP_MARKER and "ts" in e:
                marks.append(float(e["ts"]))
        host_ops += e.get("cat") == "cpu_op"
        device = device or e.get("cat") in DEVICE_CATEGORIES or e.get("cat") in CUDA_CALLS
    if not device:  # the CPU's: its host operators are what the figures read
        kept += host_ops
    marks.sort()
    steps = len(marks)
    cutoff = float("inf")
    if kept > max_events and steps > 1:
        steps = max(1, int(steps * max_events / kept))
        cutoff = marks[steps] if steps < len(marks) else cutoff
    out = BoundedTrace(steps=steps, steps_in_file=len(marks))
    for e in stream_events(path):
        if _kept(e, host_ops=not device) and float(e.get("ts", 0.0)) < cutoff:
            out.events.append(_slim(e))
            if len(out.events) >= max_events:
                break
    return out
