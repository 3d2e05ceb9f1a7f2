"""What the parent's NVML adds to a run's windows (the workload process has none): the tick from
before a diagnosis' window, which its judge weighs (``tick_before_window``), kept by each live
source (``RecentTicks``), and a profiler window's bus bandwidth against the link between the GPUs
(``with_link``). Torch-free."""

from __future__ import annotations

import dataclasses
from collections import deque
from collections.abc import Sequence

from gpudash.core.gpu_messages import GpuInfo
from gpudash.core.protocol import TRACE, Event, EventKind, GpuSample, Message
from gpudash.core.trace_note import TraceNote
from gpudash.diagnosis.judge import findings_of, judged

RECENT_GPU_TICKS = 600  # NVML ticks a source keeps for tick_before_window (5 minutes at 0.5 s)


BUS_BANDWIDTH = " GB/s of bus bandwidth"  # what a trace event's line says its collectives' bandwidth with


def with_link(event: Event, link: GpuInfo | None) -> Event:
    """A profiler window's event whose collectives' bus bandwidth is weighed against the link between
    the GPUs (the parent's NVML; the workload process has none): "231 GB/s of bus bandwidth (48% of
    NVLink's 478 GB/s)" on its line, the link in its details; as it came where either is unknown."""
    if event.kind != EventKind.MEASURED or event.what != TRACE or link is None or not link.link or not link.link_gbps:
        return event
    note = event.data
    gbps = note.figure("comm_busbw_gbps") if isinstance(note, TraceNote) else None
    if not isinstance(note, TraceNote) or gbps is None or BUS_BANDWIDTH not in event.message or note.link:
        return event
    kind = link.link.split(" ", 1)[0]
    share = f"{BUS_BANDWIDTH} ({100 * gbps / link.link_gbps:.0f}% of {kind}'s {link.link_gbps:,.0f} GB/s)"
    linked = dataclasses.replace(note, link=link.link, figures={**note.figures, "comm_link_gbps": link.link_gbps})
    return dataclasses.replace(event, message=event.message.replace(BUS_BANDWIDTH, share, 1), data=linked)


def tick_before_window(began: float | None, ticks: Sequence[GpuSample]) -> GpuSample | None:
    """The newest NVML tick (of ``ticks``, oldest first) from before a diagnosis' window began
    (``began``, the run's seconds) — the configuration's steady state, not the window's own seconds
    (a profiler's stop and its trace's export leave the GPU idle); the newest of all where it is
    not known when the window began."""
    if began is None:
        return ticks[-1] if ticks else None
    return next((t for t in reversed(ticks) if t.time_s <= began), None)


class RecentTicks:
    """The latest NVML ticks a live source has seen (``EngineSession``, ``JobSession``): a diagnosis'
    findings are judged with the one from before its window."""

    def __init__(self) -> None:
        self._ticks: deque[GpuSample] = deque(maxlen=RECENT_GPU_TICKS)
        self.machine: GpuInfo | None = None  # the sampler's machine info (the link between the GPUs), where known

    def add(self, tick: GpuSample) -> None:
        self._ticks.append(tick)

    def through(self, messages: list[Message], machine: GpuInfo | None) -> list[Message]:
        """A source's messages (oldest first) as its listeners get them: each NVML tick kept, each
        diagnosis judged (``judged``), each profiler window's bandwidth weighed (``linked``);
        ``machine``: the sampler's machine info now."""
        self.machine = machine
        out: list[Message] = []
        for m in messages:
            if isinstance(m, GpuSample):
                self.add(m)
            elif isinstance(m, Event):
                m = self.judged(self.linked(m))
            out.append(m)
        return out

    def judged(self, event: Event) -> Event:
        """A diagnosis event's findings judged with NVML's and GPM's figures from before its window
        (``gpudash.diagnosis.judge``); any other event as it came."""
        findings = findings_of(event)
        if findings is None:
            return event
        return judged(event, tick_before_window(findings.window_start_s, self._ticks), self.machine)

    def linked(self, event: Event) -> Event:
        """A profiler window's event with its bus bandwidth weighed against the link (``with_link``)."""
        return with_link(event, self.machine)
