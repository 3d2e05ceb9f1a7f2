"""What the dashboard knows about a run: bounded series for the charts, markers, per-configuration stats.

Torch-free and Textual-free: the TUI feeds it messages (``DashState.ingest``) and reads it
on its redraw timer; tests and benchmarks use it directly.

* **Series** are bounded. In ``window`` mode (a live run) they keep the latest ``maxlen``
  points, so a run of any length neither grows memory nor slows redraws. In ``whole`` mode
  (a replayed file) they keep the whole run at a falling resolution: when full, every other
  point is dropped and only every 2nd, 4th, ... new point is kept.
* **Segments** (``gpudash.stats.segments``) are stretches of one configuration, each with means and
  intervals after warm-up. The change row compares the current segment with the previous one
  (``gpudash.stats.comparison``): the ratio with its interval and a verdict; only a real difference
  (faster/slower beyond the noise threshold) is coloured.
* **Joules per step** follow ``gpudash.stats.energy`` (the CSV's definition): "now" over the last
  seconds of marks, a configuration's over its first and last mark after warm-up.
* Which metrics exist, which are averaged and how, which are charted: ``gpudash.core.metrics``.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING

from gpudash.core.compile_note import quiet
from gpudash.core.compile_table import COMPILE_WHATS, COMPILED, GRAPH_BREAK, RECOMPILE_LIMIT, CompileTable
from gpudash.core.metrics import SERIES_KEYS, STAT_KEYS, Better, Metric, Origin, metric
from gpudash.core.protocol import DIAGNOSIS, MEMORY, Event, EventKind, GpuSample, RankSample, Sample, SyncSites
from gpudash.core.running import NO_KNOBS, Running
from gpudash.core.runstate import RunState
from gpudash.stats.batch_means import seconds_for_interval
from gpudash.stats.comparison import Comparison, Estimate, Verdict
from gpudash.stats.energy import EnergyPerStep
from gpudash.stats.segments import Segment, SegmentTracker, compare_segments, incomparable
from gpudash.tui.markers import MARKER_KINDS, Marker, is_trace, marker_label, trace_start_s
from gpudash.tui.mfu import FlopsCounts
from gpudash.tui.phases import PhaseTimeline
from gpudash.tui.ranks_line import RankWindows
from gpudash.tui.series import Series

if TYPE_CHECKING:
    from gpudash.core.protocol import GpuInfo, Message, RunConfig

STAT_METRICS: tuple[Metric, ...] = tuple(metric(k) for k in STAT_KEYS)  # the stats panel, in order
_SAMPLE_SERIES = tuple(k for k in SERIES_KEYS if metric(k).origin in (Origin.WORKLOAD, Origin.MODEL))
_GPU_SERIES = tuple(k for k in SERIES_KEYS if metric(k).origin.from_gpu)


@dataclass(frozen=True)
class StatRow:
    """One column of the stats panel: now, this configuration, the previous, and the change."""

    metric: Metric
    now: float | None
    mean: float | None
    prev: float | None
    estimate: Estimate | None = None  # this configuration's mean with its interval
    prev_estimate: Estimate | None = None
    comparison: Comparison | None = None  # this against the previous, with a verdict
    incomparable: str | None = None  # why this is not compared with the previous ("new workload")
    needs_s: float | None = None  # about how much longer this configuration must run for an interval
    noisy: bool = False  # either side was measured while the machine was noisy: no colour for its verdict

    @property
    def change_pct(self) -> float | None:
        if self.mean is None or self.prev is None or self.prev == 0:
            return None
        return (self.mean - self.prev) / abs(self.prev) * 100.0

    @property
    def verdict(self) -> int:
        """+1 a real improvement, -1 a real regression; 0 within noise, unknown, or telemetry."""
        c = self.comparison
        if c is None or self.metric.better == Better.NEITHER or not c.verdict.real:
            return 0
        return 1 if c.verdict == Verdict.FASTER else -1


class Status(str, Enum):
    """What the workload is doing, as the dashboard shows it."""

    STARTING = "starting"
    RUNNING = "running"
    PAUSED = "paused"
    CRASHED = "crashed"
    STOPPED = "stopped"

    def __str__(self) -> str:
        return self.value


ENDED = frozenset({Status.CRASHED, Status.STOPPED})  # restart is possible; controls are not

# what each event kind does to the status (kinds not listed leave it)
_STATUS_AFTER = {
    EventKind.STARTING: Status.STARTING,
    EventKind.STARTED: Status.RUNNING,
    EventKind.PAUSED: Status.PAUSED,
    EventKind.RESUMED: Status.RUNNING,
    EventKind.STOPPED: Status.STOPPED,
    EventKind.CRASHED: Status.CRASHED,
}


# Configurations whose statistics the dashboard keeps: it shows the current one against the last
# different one, so a few suffice. 64 kept an hour of minute-long changes alive (docs/soak-cpu.md).
MAX_SEGMENTS = 8


def _running_of(config: RunConfig) -> Running:
    """What a run's settings say will run (the family's default variant where none is given)."""
    return Running(
        config.workload,
        config.variant or default_variant(config.workload),
        config.batch_size or 0,
        config.knobs or NO_KNOBS,
        device=config.device,
        world_size=config.nproc * config.nnodes,
    )


class DashState:
    """Everything the dashboard shows, built from messages; no I/O, no clock.

    The only writer of the run's status and of what runs (workload, variant, batch size,
    device): events and samples set them; ``mark_starting`` / ``mark_failed`` are for what
    happens to the source outside its messages (a restart begun, a start that failed).
    """

    def __init__(
        self, maxlen: int = 600, mode: str = "window", max_segments: int = MAX_SEGMENTS, config: RunConfig | None = None
    ) -> None:
        self.mode = mode
        self.series: dict[str, Series] = {k: Series(maxlen, mode) for k in SERIES_KEYS}
        self.markers: deque[Marker] = deque(maxlen=max(64, maxlen // 4))
        self.events: deque[Event] = deque(maxlen=200)
        self.tracker = SegmentTracker(max_segments)
        self.gpu_info: GpuInfo | None = None
        self.last_sample: Sample | None = None
        self.last_gpu: GpuSample | None = None
        self.status = Status.STARTING
        self.status_message = ""
        self.last_error: Event | None = None
        self.last_trace: Event | None = None  # the latest profiler window's figures
        self.last_memory: Event | None = None  # the latest figures of what a job's memory holds
        self.last_scaling: Event | None = None  # a data-parallel run's latest scaling measurement
        self.last_diagnosis: Event | None = None  # the running configuration's diagnosis (gone at a change)
        self.sync_sites: SyncSites | None = None  # the latest sync table (key y), for its configuration
        self.compiles = CompileTable()  # the compile table (key g): the run's compile events
        self.compile_lines: list[str] = []  # ... and their lines, said (a replay keeps only those)
        self.ranks: dict[int, RankSample] = {}  # a data-parallel run: each rank's latest window
        self.rank_windows = RankWindows()  # ... and each rank's own work over its latest windows (the straggler)
        self.flops = FlopsCounts()  # what each configuration's model FLOPs count was (the stats panel's border)
        self.phases = PhaseTimeline()  # a job's phases, its stalls and goodput (the header, the phase strip)
        self.run = RunState()  # what runs now: the one writer is ``self.run.observe*``
        if config is not None:
            self.run.assume(_running_of(config))
        self.paused = False
        self.time_s = 0.0  # latest time seen (run time)
        self.n_messages = 0
        self.energy = EnergyPerStep()  # "now" J/step, as the CSV computes it
        self._started_once = False
        self.version = 0  # bumped on every ingest; the UI redraws when it changed

    # -- ingest -------------------------------------------------------------------------------
    def ingest_all(self, messages: Iterable[Message]) -> int:
        n = 0
        for m in messages:
            self.ingest(m)
            n += 1
        return n

    def ingest(self, msg: Message) -> None:
        self.n_messages += 1
        self.version += 1
        if isinstance(msg, Sample):
            self._on_sample(msg)
        elif isinstance(msg, GpuSample):
            self._on_gpu(msg)
        elif isinstance(msg, Event):
            self._on_event(msg)
        elif isinstance(msg, SyncSites):
            self.sync_sites = msg
        elif isinstance(msg, RankSample):
            self.ranks[msg.rank] = msg
            self.rank_windows.add(msg)

    def _time(self, raw: float) -> float:
        self.time_s = max(self.time_s, raw)
        return raw

    def _on_sample(self, s: Sample) -> None:
        t = self._time(s.time_s)
        self.last_sample = s
        self.run.observe_sample(s)
        self.flops.on_sample(s)
        self.phases.on_sample(s)
        if self.status in (Status.STARTING, *ENDED):
            self.status = Status.PAUSED if self.paused else Status.RUNNING
        for k in _SAMPLE_SERIES:
            self.series[k].append(t, getattr(s, k))
        energy = self.last_gpu.energy_j if self.last_gpu is not None else None
        self.energy.update(t, energy, s.steps)
        self.tracker.on_sample(s)

    def _on_gpu(self, g: GpuSample) -> None:
        t = self._time(g.time_s)
        self.last_gpu = g
        for k in _GPU_SERIES:
            self.series[k].append(t, getattr(g, k))
        self.tracker.on_gpu(g)

    def _on_event(self, e: Event) -> None:
        t = self._time(e.time_s)
        self.events.append(e)
        if e.kind == EventKind.MEASURED and e.what == "scaling":
            self.last_scaling = e
        self.flops.on_event(e)
        self.phases.on_event(e)
        if e.kind == EventKind.MEASURED and e.what == DIAGNOSIS:  # judged by its source, once
            self.last_diagnosis = e
        elif e.kind in (EventKind.CHANGED, EventKind.STARTED):  # another configuration: its own diagnosis
            self.last_diagnosis = None  # ... and its own work
            self.rank_windows.clear()
        if e.kind == EventKind.MEASURED and e.what == MEMORY:
            self.last_memory = e
        if e.what in COMPILE_WHATS:  # (an older recording's may have its line alone: no note)
            self._compile_event(e, t)
        if is_trace(e):  # a profiler window: marked where it began (its steps are not in the samples)
            self.last_trace = e
            self.markers.append(Marker(trace_start_s(e), marker_label(e), e.kind))
        elif e.kind in MARKER_KINDS:
            # the first start is the left edge of the run: no marker; a restart gets one
            if e.kind != EventKind.STARTED or self._started_once:
                self.markers.append(Marker(t, marker_label(e), e.kind))
        if e.kind == EventKind.STARTED:
            self._started_once = True
        self._note_config(e)
        status = _STATUS_AFTER.get(e.kind)
        if status is not None:
            self.status = status
            self.paused = status == Status.PAUSED
            if e.kind != EventKind.PAUSED and e.kind != EventKind.RESUMED:
                self.status_message = e.message
        self.tracker.on_event(e)
        if e.kind == EventKind.CRASHED:
            self.status_message = e.message or "the workload process died"
        elif e.kind == EventKind.ERROR:
            self.last_error = e

    def _compile_event(self, e: Event, t: float) -> None:
        """A compile event: into the compile table (key g); a recompile or the limit, on the charts too."""
        self.compiles.on_event(e)
        if e.what != COMPILED and (e.what != GRAPH_BREAK or not quiet(e)):  # (a break: once)
            self.compile_lines = [*self.compile_lines[-199:], f"[{e.time_s:.1f}s] {e.message}"]
            if e.what != GRAPH_BREAK:
                self.markers.append(Marker(t, "limit" if e.what == RECOMPILE_LIMIT else "recompile", e.kind))

    def _note_config(self, e: Event) -> None:
        """What runs now, from an event."""
        self.run.observe(e)

    def adopt_config(self, config: RunConfig) -> None:
        """What runs, from a configuration learnt late (a replay's metadata), until events say."""
        if self._started_once:
            return
        self.run.assume(_running_of(config))
        self.version += 1

    @property
    def device(self) -> str:
        """The run's device, "auto" until an event names it (what runs now: ``self.run``)."""
        return self.run.device or "auto"

    def mark_starting(self) -> None:
        """The source is being (re)started: no messages yet."""
        self.status, self.status_message = Status.STARTING, ""
        self.version += 1

    def mark_failed(self, why: str) -> None:
        """The source could not start (or restart): it will send nothing."""
        self.status, self.status_message = Status.CRASHED, why
        self.version += 1

    @property
    def ended(self) -> bool:
        return self.status in ENDED

    # -- read -----------------------------------------------------------------------------------
    def time_range(self) -> tuple[float, float]:
        """The shared time axis: every chart shows [t0, t1]."""
        # the series with data, with their first and last times (a series has both or neither)
        spans = [(s.first_t, s.last_t, s) for s in self.series.values()]
        nonempty = [(first, last, s) for first, last, s in spans if first is not None and last is not None]
        lasts = [last for _, last, _ in nonempty]
        t1 = max([*lasts, self.time_s]) if lasts else max(self.time_s, 1.0)
        if not nonempty:
            return 0.0, max(t1, 1.0)
        full = [first for first, _, s in nonempty if len(s) >= s.maxlen]
        if self.mode == "window" and full:
            # a full window has dropped its oldest points: start where every chart has data
            t0 = max(full)
        else:
            t0 = min(first for first, _, _ in nonempty)
        if t1 - t0 < 1.0:
            t1 = t0 + 1.0
        return t0, t1

    def visible_markers(self, t0: float, t1: float) -> list[Marker]:
        return [m for m in self.markers if t0 <= m.time_s <= t1]

    @property
    def segments(self) -> deque[Segment]:
        return self.tracker.segments

    @property
    def current(self) -> Segment | None:
        return self.tracker.current

    @property
    def previous(self) -> Segment | None:
        """The last segment before the current one with a different configuration."""
        return self.tracker.previous

    def now(self, key: str) -> float | None:
        """The latest value of a metric (J/step: over the last seconds, as in the CSV)."""
        origin = metric(key).origin
        if origin == Origin.DERIVED:
            return self.energy.value
        latest = self.last_gpu if origin.from_gpu else self.last_sample
        return getattr(latest, key, None) if latest is not None else None

    def stat_rows(self) -> list[StatRow]:
        cur, prev = self.current, self.previous
        noisy = any(seg is not None and seg.noise.is_noisy for seg in (cur, prev))
        rows = []
        for m in STAT_METRICS:
            estimate = cur.estimate(m.key) if cur is not None else None
            rows.append(
                StatRow(
                    metric=m,
                    now=self.now(m.key),
                    mean=cur.mean(m.key) if cur is not None else None,
                    prev=prev.mean(m.key) if prev is not None else None,
                    estimate=estimate,
                    prev_estimate=prev.estimate(m.key) if prev is not None else None,
                    comparison=compare_segments(prev, cur, m.key),
                    incomparable=incomparable(prev.key, cur.key, m.key) if prev and cur else None,
                    needs_s=self._needs_s(cur, m.key),
                    noisy=noisy,
                )
            )
        return rows

    def _needs_s(self, segment: Segment | None, key: str) -> float | None:
        """How much longer the running configuration needs for an interval (None: it has one),
        from the length of the latest sample (a job's long steps: from theirs)."""
        per_sample = self.last_sample.interval_s if self.last_sample is not None else 1.0
        if segment is None:
            return seconds_for_interval(0, per_sample)
        return segment.needs_s(key, per_sample)

    def flops_event(self) -> Event | None:
        """The "flops" event of the configuration running now: what was counted, or why MFU is blank."""
        return self.flops.of(self.last_sample)


def default_variant(workload: str) -> str:
    """The family's default variant ('' for a workload the catalog does not know)."""
    from workloads.registry import FAMILIES  # torch-free

    fam = FAMILIES.get(workload)
    return fam.default_variant if fam else ""
