"""Figures of one profiler window, from its Chrome trace events. Torch-free.

What NVML's utilisation cannot say, read from the device activity of a ``torch.profiler`` trace:
how much of the steps' span the GPU ran anything (busy %), the gaps between (idle %), the host's
time to enqueue a step against the GPU's time for it, each stream's busy share, how much of the
busy time two or more streams ran at once (multi-stream overlap %), kernels per step, the launch
delay (a launch call → its first kernel's start, median), the memcpy share, the five kernels
that took the most time, and the collectives (NCCL's kernels) by kind: their time and their exposed
time, in which a collective's kernel runs and no computation kernel does (``comm_exposed``). The
figures in a diagnosis' evidence: ``trace_evidence``.

Computed here from the trace events rather than with Holistic Trace Analysis: HTA is not among
gpudash's dependencies (it brings pandas and plotly), reads trace *directories* of whole runs
into data frames, and these figures are a few interval unions over one window's events, done in
the workload process right after the window.
"""

from __future__ import annotations

import gzip
import json
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpudash.core.lenient import int_or
from gpudash.core.metrics import overlap_bound
from gpudash.core.trace_note import TraceNote
from gpudash.engine.collectives import Collective, collectives_of, kind_key
from gpudash.engine.comm_exposed import comm_fields, communication
from gpudash.engine.host_gaps import host_gaps_ms_per_step
from gpudash.engine.intervals import Interval, clip, covered_by_two_or_more, event_interval, length, union

KERNEL, MEMCPY, MEMSET = "kernel", "gpu_memcpy", "gpu_memset"
STAGE_PREFIX = "gpudash.stage."  # record_function names around each stage during a window
STEP_MARKER = "gpudash.step"  # the record_function range around each step of a window (the host's enqueue)
DEVICE_CATEGORIES = (KERNEL, MEMCPY, MEMSET)
CUDA_CALLS = ("cuda_runtime", "cuda_driver")  # the host's CUDA calls: the runtime's and the driver's
# the host's kernel launches: the runtime's (eager torch), and the driver's (a compiled model's Triton kernels)
LAUNCH_NAMES = ("cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel", "cuLaunchKernelEx", "cudaGraphLaunch")
# the runtime calls in which the host waits for the GPU (a sync: .item(), .cpu(), a blocking copy)
WAIT_NAMES = ("cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize", "cudaMemcpy")


@dataclass(frozen=True)
class TraceFigures:
    """One window's figures; GPU figures are None without device activity (a CPU run)."""

    steps: int
    wall_ms: float
    gpu_busy_pct: float | None = None  # of the steps' span (the window's wall without step markers)
    idle_pct: float | None = None
    gpu_ms_per_step: float | None = None  # the GPU's busy time (any stream) per step, in the same span
    host_ms_per_step: float | None = None  # median host time to enqueue a step (its step marker)
    host_wait_ms_per_step: float | None = None  # ... of it, median, inside calls that wait for the GPU (WAIT_NAMES)
    host_gaps_ms_per_step: float | None = None  # ... of it, median, outside torch in stretches of 1 ms or more
    span_ms: float | None = None  # the steps' span: first step marker's start → the last device activity's end
    overlap_pct: float | None = None  # of the busy time, with kernels on >= 2 streams
    memcpy_pct: float | None = None
    kernels_per_step: float | None = None
    launch_delay_us: float | None = None  # median, CPU launch call → its first kernel's start
    stream_busy_pct: dict[int, float] = field(default_factory=dict)
    stream_ms_per_step: dict[int, float] = field(default_factory=dict)
    top_kernels: tuple[tuple[str, float], ...] = ()  # (name, ms per step), largest first
    stage_ms_per_step: dict[str, float] = field(default_factory=dict)  # GPU time of each stage's kernels
    # The collectives (NCCL's kernels), in ms of a traced step (the span over ``steps``, never more):
    comm_ms_per_step: float | None = None  # their time
    comm_exposed_ms_per_step: float | None = None  # ... of it, with no computation kernel running (nothing hides it)
    comm_exposed_share: float | None = None  # ... as a share of the span (0 to 1): of the job's step, too
    comm_kind_ms_per_step: dict[str, float] = field(default_factory=dict)  # each kind's (COLLECTIVE_KINDS) time
    comm_exposed_kind_ms_per_step: dict[str, float] = field(default_factory=dict)  # ... and exposed time
    collectives: tuple[Collective, ...] = ()  # each collective's kernel, for matching the ranks' windows

    @property
    def overlap_bound(self) -> float | None:
        """1000 / max(stage GPU ms per step): the steps/s a perfect two-stage pipeline reaches."""
        return overlap_bound(self.stage_ms_per_step.values())

    @property
    def has_gpu(self) -> bool:
        return self.gpu_busy_pct is not None

    def comm_exposed_ms_of(self, step_ms: float) -> float | None:
        """The exposed collectives in ms of a step of ``step_ms`` (the job's, untraced): the traced
        steps' share of it, so never more than the step; None without collectives."""
        return None if self.comm_exposed_share is None else min(1.0, self.comm_exposed_share) * step_ms

    def comm_exposed_kinds_of(self, step_ms: float) -> dict[str, float]:
        """Each collective kind's exposed ms of a step of ``step_ms``, as ``comm_exposed_ms_of``."""
        traced = traced_step_ms(self)
        if not traced:
            return {}
        return {kind: min(ms / traced, 1.0) * step_ms for kind, ms in self.comm_exposed_kind_ms_per_step.items()}

    def summary(self) -> str:
        """One line for the user."""
        head = f"{self.steps} steps traced, {self.wall_ms / max(self.steps, 1):.3g} ms/step"
        if not self.has_gpu:
            return f"{head}; GPU figures need CUDA"
        return (
            f"{head}: GPU busy {self.gpu_busy_pct:.1f}%, idle {self.idle_pct:.1f}%, "
            f"overlap {self.overlap_pct:.1f}% of busy, {self.kernels_per_step:.0f} kernels/step"
        )

    def numbers(self) -> dict[str, float]:
        """The window's figures by name (the "trace" event's ``TraceNote.figures``): each measured one,
        each stream's and stage's, the overlap bound, the collectives' by kind."""
        out: dict[str, float] = {}
        for key in (
            "gpu_busy_pct",
            "idle_pct",
            "gpu_ms_per_step",
            "host_ms_per_step",
            "host_wait_ms_per_step",
            "host_gaps_ms_per_step",
            "span_ms",
            "overlap_pct",
            "memcpy_pct",
            "kernels_per_step",
            "launch_delay_us",
            "comm_ms_per_step",
            "comm_exposed_ms_per_step",
        ):
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        for sid, pct in self.stream_busy_pct.items():
            out[f"stream_{sid}_busy_pct"] = pct
            out[f"stream_{sid}_ms_per_step"] = self.stream_ms_per_step[sid]
        for name, ms in self.stage_ms_per_step.items():
            out[f"stage_{name}_ms_per_step"] = ms
        if self.overlap_bound is not None:
            out["overlap_bound_steps_per_s"] = self.overlap_bound
        return {**out, **self.comm_numbers()}

    def comm_numbers(self) -> dict[str, float]:
        """The collectives' figures: their exposed % of the span, each kind's ms (and exposed ms) a traced step."""
        out = {} if self.comm_exposed_share is None else {"comm_exposed_pct": 100 * self.comm_exposed_share}
        for kind, ms in self.comm_kind_ms_per_step.items():
            exposed = self.comm_exposed_kind_ms_per_step.get(kind, 0.0)
            out |= {f"comm_{kind_key(kind)}_ms_per_step": ms, f"comm_{kind_key(kind)}_exposed_ms_per_step": exposed}
        return out

    def note(self, path: str, start_s: float | None = None, **more: float) -> TraceNote:
        """The "trace" event's data: this window's figures (and ``more``: the run's own, beside them)."""
        kernels = tuple((name[:120], ms) for name, ms in self.top_kernels)
        return TraceNote(path, self.steps, self.wall_ms, start_s, {**self.numbers(), **more}, kernels)


def read_events(path: str | Path) -> list[dict[str, Any]]:
    """The ``traceEvents`` of a Chrome trace (``.json`` or ``.json.gz``)."""
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        return list(json.load(f)["traceEvents"])


def figures(events: Sequence[dict[str, Any]], steps: int, wall_ms: float) -> TraceFigures:
    """The window's figures from its trace events; ``wall_ms``: the window's wall time.

    Busy and idle come from one and the same span: from the first step marker's start (the host
    begins the first step) to the end of the last device activity or step, whichever is later; busy is
    the union of kernel, copy and memset intervals inside it, so it never exceeds the span. Without
    step markers (a trace from elsewhere) the span is the window's wall."""
    device = [e for e in events if e.get("cat") in DEVICE_CATEGORIES and "dur" in e and "ts" in e]
    marks = step_markers(events)
    if not device:  # the CPU: the host's time outside torch, where its operators were recorded
        return TraceFigures(steps=steps, wall_ms=wall_ms, host_gaps_ms_per_step=host_gaps_ms_per_step(events, marks))
    span = steps_span(events, device) or device_span(device, wall_ms)
    span_us = span[1] - span[0]
    per_step = 1.0 / (1000.0 * max(steps, 1))  # µs over the window → ms per step
    kernels = [e for e in device if e["cat"] == KERNEL]
    busy_us = length(clip(union(event_interval(e) for e in device), span))
    merged = kernels_by_stream(kernels)
    kernel_busy = union(iv for ivs in merged.values() for iv in ivs)
    totals: dict[str, float] = {}
    for e in kernels:
        totals[str(e.get("name", "?"))] = totals.get(str(e.get("name", "?")), 0.0) + float(e["dur"])
    top = sorted(totals.items(), key=lambda kv: kv[1], reverse=True)[:5]
    return TraceFigures(
        steps=steps,
        wall_ms=wall_ms,
        gpu_busy_pct=_pct(busy_us, span_us),
        idle_pct=max(0.0, 100.0 - _pct(busy_us, span_us)),
        gpu_ms_per_step=busy_us * per_step,
        host_ms_per_step=_host_ms_per_step(events),
        host_wait_ms_per_step=_host_wait_ms_per_step(events),
        host_gaps_ms_per_step=host_gaps_ms_per_step(events, marks),
        span_ms=span_us / 1000.0,
        overlap_pct=_pct(covered_by_two_or_more(list(merged.values())), length(kernel_busy)),
        memcpy_pct=_pct(length(clip(union(event_interval(e) for e in device if e["cat"] == MEMCPY), span)), span_us),
        kernels_per_step=len(kernels) / max(steps, 1),
        launch_delay_us=_launch_delay(events, kernels),
        stream_busy_pct={sid: _pct(length(clip(iv, span)), span_us) for sid, iv in sorted(merged.items())},
        stream_ms_per_step={sid: length(iv) * per_step for sid, iv in sorted(merged.items())},
        top_kernels=tuple((name, us * per_step) for name, us in top),
        stage_ms_per_step={name: length(union(iv)) * per_step for name, iv in _stage_kernels(events, kernels).items()},
        **comm_fields(communication(kernels, span), span_us, per_step),
        collectives=collectives_of(kernels, span),
    )


def traced_step_ms(fig: TraceFigures) -> float | None:
    """A traced step's wall time: the steps' span (or the window's wall) over its steps."""
    if fig.steps < 1:
        return None
    return (fig.span_ms if fig.span_ms is not None else fig.wall_ms) / fig.steps


def step_markers(events: Iterable[dict[str, Any]]) -> list[Interval]:
    """The host's step ranges (``STEP_MARKER``), in order."""
    return sorted(
        event_interval(e)
        for e in events
        if e.get("cat") == "user_annotation" and e.get("name") == STEP_MARKER and "ts" in e and "dur" in e
    )


def steps_span(events: Sequence[dict[str, Any]], device: Sequence[dict[str, Any]]) -> Interval | None:
    """From the first step's start on the host to whichever ends later, the last step on the host or
    the last device activity (the GPU's backlog of the last steps); None without step markers."""
    marks = step_markers(events)
    if not marks:
        return None
    end = max([b for _, b in marks] + [event_interval(e)[1] for e in device])
    return marks[0][0], end


def device_span(device: Sequence[dict[str, Any]], wall_ms: float) -> Interval:
    """The steps' span of a window without step markers (its host's operators not recorded): from
    the first device activity to the last, or the window's wall from 0 where the events lie in it
    (a trace made by hand)."""
    first = min(float(e["ts"]) for e in device)
    last = max(float(e["ts"]) + float(e["dur"]) for e in device)
    return (0.0, wall_ms * 1000.0) if first >= 0.0 and last <= wall_ms * 1000.0 else (first, last)


def _host_ms_per_step(events: Sequence[dict[str, Any]]) -> float | None:
    marks = step_markers(events)
    return statistics.median(b - a for a, b in marks) / 1000.0 if marks else None


def _host_wait_ms_per_step(events: Sequence[dict[str, Any]]) -> float | None:
    """The median over the steps of the host's time inside calls that wait for the GPU; None where
    the window recorded no CUDA call (gpudash's kernels-only window: not measured, not nought)."""
    marks = step_markers(events)
    if not marks or not any(e.get("cat") in CUDA_CALLS for e in events):
        return None
    waits = union(
        event_interval(e) for e in events if e.get("cat") in CUDA_CALLS and e.get("name") in WAIT_NAMES and "dur" in e
    )
    return statistics.median(length(clip(waits, mark)) for mark in marks) / 1000.0


def kernels_by_stream(events: Iterable[dict[str, Any]]) -> dict[int, list[Interval]]:
    """Each CUDA stream's kernel time, merged: stream id → sorted disjoint intervals (µs)."""
    streams: dict[int, list[Interval]] = {}
    for e in events:
        if e.get("cat") == KERNEL and "dur" in e and "ts" in e:
            streams.setdefault(int_or(e.get("args", {}).get("stream", -1), -1), []).append(event_interval(e))
    return {sid: union(iv) for sid, iv in streams.items()}


def _pct(part: float, whole: float) -> float:
    return 100.0 * part / whole if whole > 0 else 0.0


def _stage_kernels(events: Sequence[dict[str, Any]], kernels: Sequence[dict[str, Any]]) -> dict[str, list[Interval]]:
    """Each kernel's interval, by the stage whose ``record_function`` range (on the CPU) holds the
    call that launched it (kernel → launch call by correlation id)."""
    ranges = sorted(
        (float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0.0)), str(e["name"])[len(STAGE_PREFIX) :])
        for e in events
        if e.get("cat") == "user_annotation" and str(e.get("name", "")).startswith(STAGE_PREFIX)
    )
    if not ranges:
        return {}
    launches = {
        e.get("args", {}).get("correlation"): float(e["ts"])
        for e in events
        if e.get("cat") in CUDA_CALLS and e.get("name") in LAUNCH_NAMES
    }
    out: dict[str, list[Interval]] = {}
    for k in kernels:
        at = launches.get(k.get("args", {}).get("correlation"))
        if at is None:
            continue
        stage = next((name for start, end, name in ranges if start <= at <= end), None)
        if stage is not None:
            out.setdefault(stage, []).append(event_interval(k))
    return out


def _launch_delay(events: Sequence[dict[str, Any]], kernels: Sequence[dict[str, Any]]) -> float | None:
    """Median µs from each launch call on the CPU to the start of the first kernel it launched on the
    GPU: how long launched work waits in the GPU's queue (a graph launch counts once, by its first
    kernel, not by each of its kernels waiting behind the others)."""
    launches = {
        e.get("args", {}).get("correlation"): float(e["ts"])
        for e in events
        if e.get("cat") in CUDA_CALLS and e.get("name") in LAUNCH_NAMES
    }
    first: dict[Any, float] = {}
    for k in kernels:
        c = k.get("args", {}).get("correlation")
        if c is not None and c in launches:
            first[c] = min(first.get(c, float("inf")), float(k["ts"]))
    delays = [start - launches[c] for c, start in first.items()]
    return statistics.median(delays) if delays else None
