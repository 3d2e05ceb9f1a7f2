"""A diagnosis judged again in the parent with NVML's and GPM's figures of the GPU it ran on (the
workload process has no NVML): the tick from before its window (``tick_before_window``), kept by
every reader of a run (``RecentTicks``). Torch-free."""

from __future__ import annotations

import dataclasses
from collections import deque
from collections.abc import Sequence

from gpudash.core.gpu_messages import GpuInfo
from gpudash.core.protocol import JOB_PREFIX, TRACE, Event, EventKind, GpuSample
from gpudash.diagnosis.advice import for_the_job
from gpudash.diagnosis.evidence import WINDOW_START, Evidence
from gpudash.diagnosis.rules import diagnose

RECENT_GPU_TICKS = 600  # NVML ticks a reader keeps for tick_before_window (5 minutes at 0.5 s)


def with_gpu_telemetry(event: Event, gpu: GpuSample | None, link: GpuInfo | None = None) -> Event:
    """A diagnosis event judged again with NVML's figures of the GPU it ran on (the parent's: the
    workload process has no NVML): memory-bandwidth share, throttling and GPM's SM, tensor and DRAM
    activity, and the link between the GPUs (``link``: the sampler's machine info, where it said
    one). ``gpu``: the latest GPU sample from before the window (the configuration's steady
    state), None: as it came."""
    gpm = (gpu.sm_active_pct, gpu.tensor_active_pct, gpu.dram_active_pct) if gpu is not None else (None,) * 3
    if gpu is None or (gpu.mem_bw_util_pct is None and not gpu.throttle and gpm == (None,) * 3):
        return event
    linked = link is not None and link.link is not None and "diag_comm_busbw_gbps" in event.details
    evidence = dataclasses.replace(
        Evidence.from_details(event.details),
        mem_bw_pct=gpu.mem_bw_util_pct,
        throttled=gpu.throttle or None,
        sm_active_pct=gpm[0],
        tensor_active_pct=gpm[1],
        dram_active_pct=gpm[2],
        comm_link=link.link if linked and link is not None else None,
        comm_link_gbps=link.link_gbps if linked and link is not None else None,
    )
    verdict = diagnose(evidence)
    if event.details.get("workload", "").startswith(JOB_PREFIX):
        verdict = for_the_job(verdict, evidence)
    if "compile_why" in event.details:  # compile-bound stands: the window's verdict is the steps' between compiles
        return dataclasses.replace(event, details={**event.details, **evidence.details(), "steady": verdict.line()})
    details = {**event.details, **evidence.details(), "bound": str(verdict.bound)}
    return dataclasses.replace(event, message=verdict.line(), details=details)


BUS_BANDWIDTH = " GB/s of bus bandwidth"  # what a trace event's line says its collectives' bandwidth with


def with_link(event: Event, link: GpuInfo | None) -> Event:
    """A profiler window's event whose collectives' bus bandwidth is weighed against the link between
    the GPUs (the parent's NVML; the workload process has none): "231 GB/s of bus bandwidth (48% of
    NVLink's 478 GB/s)" on its line, the link in its details; as it came where either is unknown."""
    if event.kind != EventKind.MEASURED or event.what != TRACE or link is None or not link.link or not link.link_gbps:
        return event
    try:
        gbps = float(event.details["comm_busbw_gbps"])
    except (KeyError, ValueError):
        return event
    if BUS_BANDWIDTH not in event.message or "comm_link" in event.details:
        return event
    kind = link.link.split(" ", 1)[0]
    share = f"{BUS_BANDWIDTH} ({100 * gbps / link.link_gbps:.0f}% of {kind}'s {link.link_gbps:,.0f} GB/s)"
    details = {**event.details, "comm_link": link.link, "comm_link_gbps": f"{link.link_gbps:.4g}"}
    return dataclasses.replace(event, message=event.message.replace(BUS_BANDWIDTH, share, 1), details=details)


def tick_before_window(event: Event, ticks: Sequence[GpuSample]) -> GpuSample | None:
    """The newest NVML tick (of ``ticks``, oldest first) from before a diagnosis event's window
    began — the configuration's steady state, not the window's own seconds (a profiler's stop and
    its trace's export leave the GPU idle); the newest of all for an event that does not say when
    its window began (recorded before it did)."""
    try:
        began = float(event.details[WINDOW_START])
    except (KeyError, ValueError):
        return ticks[-1] if ticks else None
    return next((t for t in reversed(ticks) if t.time_s <= began), None)


class RecentTicks:
    """The latest NVML ticks a reader of the run has seen (the dashboard, a headless recording, a
    sweep, tune): a diagnosis is judged again with the one from before its window."""

    def __init__(self) -> None:
        self._ticks: deque[GpuSample] = deque(maxlen=RECENT_GPU_TICKS)
        self.machine: GpuInfo | None = None  # the sampler's machine info (the link between the GPUs), where known

    def add(self, tick: GpuSample) -> None:
        self._ticks.append(tick)

    def judge(self, event: Event) -> Event:
        """A diagnosis event judged again with NVML's and GPM's figures from before its window."""
        return with_gpu_telemetry(event, tick_before_window(event, self._ticks), self.machine)

    def linked(self, event: Event) -> Event:
        """A profiler window's event with its bus bandwidth weighed against the link (``with_link``)."""
        return with_link(event, self.machine)
