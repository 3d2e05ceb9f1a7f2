"""What the watch dashboard reads and how it answers keys, without Textual: ``WatchSource`` (the
NVML sampler as an ``EngineSource`` with no workload behind it) and ``WatchController`` (the
dashboard's controller, told that nothing runs: the keys that steer a workload say so).
"""

from __future__ import annotations

from collections.abc import Sequence

from gpudash.core.protocol import NVML_LOST, Control, Event, EventKind, GpuInfo, Message, RunConfig, SourceInfo
from gpudash.host.nvml import NvmlSampler
from gpudash.tui.controller import DashController
from gpudash.tui.notices import Notice, Severity, warning
from gpudash.watch.record import focus_first_watched
from gpudash.watch.snapshot import Snapshot, take

WATCH = "watch"  # the "workload" a watch's state and file names carry
CHART_GPU = "gpu"  # the ``what`` of the event that moves the charts to another GPU


class NoWorkload(RuntimeError):
    """A control sent to ``gpudash watch``, which runs no workload."""


class WatchSource:
    """Every watched GPU's NVML samples, from the dashboard's own sampler; no workload."""

    def __init__(self, interval_s: float = RunConfig.gpu_interval_s, gpus: Sequence[int] | None = None) -> None:
        self.config = RunConfig(workload=WATCH, gpu_interval_s=interval_s, gpus=tuple(gpus) if gpus else None)
        self.sampler = NvmlSampler(None, interval_s, gpus=gpus)
        self._alive = False

    @property
    def gpu_info(self) -> GpuInfo:
        return self.sampler.info

    @property
    def info(self) -> SourceInfo:
        return SourceInfo()

    @property
    def alive(self) -> bool:
        return self._alive

    def start(self) -> None:
        """Open NVML and sample every ``interval_s`` (without NVML: nothing, and ``gpu_info`` says why)."""
        self.sampler.open()
        focus_first_watched(self.sampler)
        self.sampler.start()
        self._alive = True

    def restart(self) -> None:
        self.start()

    def stop(self) -> None:
        self.sampler.stop()
        self._alive = False

    def send(self, control: Control) -> None:
        raise NoWorkload("gpudash watch runs no workload")

    def poll(self) -> list[Message]:
        return list(self.sampler.drain())

    def snapshot(self) -> Snapshot:
        """Every watched GPU now, with its processes (blocking: NVML and ``/proc``; a thread's call)."""
        return take(self.sampler)

    def chart(self, index: int) -> Event | None:
        """Chart GPU ``index`` from the next sample on; the event that marks it (None: no change)."""
        before = self.sampler.info.index
        if not self.sampler.select(index=index):
            return None
        t = self.sampler.clock() - self.sampler.t0
        return Event(
            t, EventKind.CHANGED, what=CHART_GPU, before=str(before), after=str(index), message=f"charting GPU {index}"
        )


class WatchController(DashController):
    """The dashboard's controller over a ``WatchSource``: recording, screenshots and the charts
    work; a key that steers a workload says that watch runs none."""

    def enabled(self, action: str, steers: bool) -> bool:
        if action == "record":  # NVML's readings are what a watch records
            info = self.state.gpu_info
            return info is not None and info.available
        return not steers

    def not_now(self, action: str, what: str) -> Notice:
        if action == "record":
            return warning("nothing to record: NVML is unavailable here (the panel says why)")
        return no_workload(what)

    def send(self, control: Control, note: str) -> Notice:
        return no_workload(type(control).__name__)

    def status_text(self) -> str:
        info = self.state.gpu_info
        if info is None:
            return "starting"
        return "watching" if info.available else "no NVML"

    def event_notices(self, e: Event) -> list[Notice]:
        if e.kind == EventKind.ERROR and e.what == NVML_LOST:
            return [Notice(f"✗ {e.message}", Severity.ERROR, toast=True)]
        if e.kind == EventKind.CHANGED and e.what == CHART_GPU:
            return [Notice(f"the charts show GPU {e.after} from {e.time_s:.1f} s (marked on them)")]
        return super().event_notices(e)


def no_workload(what: str) -> Notice:
    """Why a key or command that steers a workload does nothing here."""
    return warning(f"gpudash watch runs no workload: {what} needs one (gpudash -w NAME runs one)")
