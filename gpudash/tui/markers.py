"""The charts' markers (``Marker``): which events get one and its label — a change of variant,
batch or knobs ("+cuda_graph", "batch 8→16"), a start, pause or end, a profiler window (marked where
it began, its figures in one line: ``trace_line``). Torch-free."""

from __future__ import annotations

from dataclasses import dataclass

from gpudash.core.protocol import TRACE, Event, EventKind
from gpudash.core.trace_note import TraceNote

MARKER_KINDS = frozenset(
    {EventKind.STARTED, EventKind.CHANGED, EventKind.PAUSED, EventKind.RESUMED, EventKind.CRASHED, EventKind.STOPPED}
)


def is_trace(e: Event) -> bool:
    """A profiler window's figures (``TraceWindow``'s answer)."""
    return e.kind == EventKind.MEASURED and e.what == TRACE


@dataclass(frozen=True)
class Marker:
    time_s: float
    label: str
    kind: EventKind


def _knobs_change(before: str, after: str) -> str:
    """What a knob change did, short: "+cuda_graph", "-amp", "compile=max-autotune"."""
    from workloads.catalog_types import WorkloadError
    from workloads.knobs import parse_knobs

    try:
        old, new = parse_knobs(before), parse_knobs(after)
    except WorkloadError:
        return f"knobs {before}→{after}"
    parts = [f"-{n}" for n in old if n not in new]
    for n in new:
        if n not in old:
            parts.append(f"+{n}" if new[n] == "on" else f"+{n}={new[n]}")
        elif old[n] != new[n]:
            parts.append(f"{n}={new[n]}")
    return " ".join(parts) or "knobs"


def trace_of(e: Event | None) -> TraceNote | None:
    """A profiler window's answer (None: ``e`` is none)."""
    return e.data if e is not None and isinstance(e.data, TraceNote) else None


def trace_start_s(e: Event) -> float:
    """When a profiler window began: the window says; else (a job's, whose windows the hooks time)
    the event's time less the window's wall time, export time aside."""
    note = trace_of(e)
    if note is not None and note.start_s is not None:
        return min(note.start_s, e.time_s)
    return max(0.0, e.time_s - (note.wall_ms if note is not None else 0.0) / 1000.0)


def trace_line(e: Event) -> str:
    """A profiler window's figures in one line: "GPU busy 72%, idle 28%, overlap 31%, 145 kernels/step,
    at 88% of the overlap bound (t=12.3 s)" (the bound where the variant has two stages); on the CPU
    its step time and that GPU figures need CUDA."""
    note = trace_of(e)
    figure = note.figure if note is not None else (lambda name: None)
    busy, idle, overlap = (figure(k) for k in ("gpu_busy_pct", "idle_pct", "overlap_pct"))
    kernels = figure("kernels_per_step")
    at = f"(t={trace_start_s(e):.1f} s)"
    if busy is None:
        head = (
            f"{note.steps} steps, {note.wall_ms / max(note.steps, 1):.3g} ms/step"
            if note and note.steps
            else "CPU only"
        )
        return f"{head}; GPU figures need CUDA {at}"
    parts = [f"GPU busy {busy:.0f}%"]
    if idle is not None:
        parts.append(f"idle {idle:.0f}%")
    if overlap is not None:
        parts.append(f"overlap {overlap:.0f}%")
    if kernels is not None:
        parts.append(f"{kernels:.0f} kernels/step")
    pct = figure("pct_of_overlap_bound")
    if pct is not None:
        parts.append(f"at {pct:.0f}% of the overlap bound")
    comm, exposed = figure("comm_ms_per_step"), figure("comm_exposed_ms_per_step")
    if comm is not None and exposed is not None:
        parts.append(f"all-reduce {comm:.3g} ms/step, {exposed:.3g} exposed")
    return f"{', '.join(parts)} {at}"


def marker_label(e: Event) -> str:
    if is_trace(e):
        return TRACE
    if e.kind == EventKind.CHANGED and e.what == "knobs":
        return _knobs_change(e.before, e.after)
    if e.kind == EventKind.CHANGED and e.what:
        what = {"batch_size": "batch", "variant": "", "workload": ""}.get(e.what, e.what)
        return f"{what} {e.before}→{e.after}".strip() if e.before else f"{what} {e.after}".strip()
    return e.kind
