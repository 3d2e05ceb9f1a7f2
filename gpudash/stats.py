"""What the dashboard knows about a run: bounded series for the charts, markers, per-configuration stats.

Torch-free and Textual-free: the TUI feeds it messages (``DashState.ingest``) and reads it
on its redraw timer; tests and benchmarks use it directly.

* **Series** are bounded. In ``window`` mode (a live run) they keep the latest ``maxlen``
  points, so a run of any length neither grows memory nor slows redraws. In ``whole`` mode
  (a replayed file) they keep the whole run at a falling resolution: when full, every other
  point is dropped and only every 2nd, 4th, ... new point is kept.
* **Segments** are stretches of one configuration (workload, variant, batch size). A
  ``changed`` event, a restart, or a sample whose configuration differs starts a new one.
  Segment means are computed from every message (not from the bounded series), skipping the
  samples of the first SETTLE_S seconds after a change or a resume (the rebuild, allocator and
  loader warm-up land there; kept only if the configuration ran for less than that)
  unless it is the only one, and nothing while paused. The change in percent is the mean of
  the current segment against the mean of the previous one: the number the articles report.
* **Joules per step** come from the NVML energy counter: energy delta over steps delta, each
  pair taken when a sample arrives.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from gpudash.protocol import Event, EventKind, GpuInfo, GpuSample, Message, Sample

# -- the metrics the stats panel shows, in order: (key, label, unit, better) -------------------
# better: +1 higher is better, -1 lower is better, 0 neither (telemetry)
STAT_METRICS: tuple[tuple[str, str, str, int], ...] = (
    ("steps_per_s", "steps/s", "", +1),
    ("samples_per_s", "samples/s", "", +1),
    ("step_ms_p50", "p50 ms", "ms", -1),
    ("step_ms_p95", "p95 ms", "ms", -1),
    ("syncs_per_step", "syncs/st", "", -1),
    ("gpu_util_pct", "kernel%", "%", 0),
    ("mem_bw_util_pct", "mem-bw%", "%", 0),
    ("power_w", "power W", "W", 0),
    ("joules_per_step", "J/step", "J", -1),
)
SAMPLE_METRICS = ("steps_per_s", "samples_per_s", "step_ms_p50", "step_ms_p95", "syncs_per_step")
GPU_METRICS = ("gpu_util_pct", "mem_bw_util_pct", "mem_used_mib", "power_w", "sm_clock_mhz")
SETTLE_S = 1.0  # seconds after a change or resume left out of the configuration's means
NOW_WINDOW_S = 3.0  # "now" J/step spans this much time
MARKER_KINDS = frozenset({EventKind.STARTED, EventKind.CHANGED, EventKind.PAUSED, EventKind.RESUMED,
                          EventKind.CRASHED, EventKind.STOPPED})


class Series:
    """(time, value) points, bounded; ``None`` values are kept out (they leave a gap)."""

    def __init__(self, maxlen: int = 600, mode: str = "window") -> None:
        if mode not in ("window", "whole"):
            raise ValueError(f"mode must be 'window' or 'whole', got {mode!r}")
        self.maxlen = maxlen
        self.mode = mode
        self.t: deque[float] = deque(maxlen=maxlen if mode == "window" else None)
        self.v: deque[float] = deque(maxlen=maxlen if mode == "window" else None)
        self._stride = 1
        self._skip = 0

    def append(self, t: float, value: float | None) -> None:
        if value is None:
            return
        if self.mode == "whole":
            if self._skip:
                self._skip -= 1
                return
            self._skip = self._stride - 1
            if len(self.t) >= self.maxlen:
                self.t = deque(list(self.t)[::2])
                self.v = deque(list(self.v)[::2])
                self._stride *= 2
                self._skip = self._stride - 1
        self.t.append(t)
        self.v.append(float(value))

    def __len__(self) -> int:
        return len(self.t)

    def clear(self) -> None:
        self.t.clear()
        self.v.clear()
        self._stride, self._skip = 1, 0

    @property
    def first_t(self) -> float | None:
        return self.t[0] if self.t else None

    @property
    def last_t(self) -> float | None:
        return self.t[-1] if self.t else None

    def points(self, t0: float, t1: float, max_points: int) -> tuple[list[float], list[float]]:
        """The points within [t0, t1], bucket-averaged down to at most ``max_points``."""
        pts = [(t, v) for t, v in zip(self.t, self.v) if t0 <= t <= t1]
        return downsample(pts, max_points)


def downsample(pts: list[tuple[float, float]], max_points: int) -> tuple[list[float], list[float]]:
    """Average consecutive points in equal-count buckets so at most ``max_points`` remain."""
    n = len(pts)
    if max_points <= 0 or n <= max_points:
        return [p[0] for p in pts], [p[1] for p in pts]
    xs: list[float] = []
    ys: list[float] = []
    step = n / max_points
    for i in range(max_points):
        a, b = int(i * step), int((i + 1) * step)
        chunk = pts[a:b] or pts[a : a + 1]
        xs.append(sum(p[0] for p in chunk) / len(chunk))
        ys.append(sum(p[1] for p in chunk) / len(chunk))
    return xs, ys


class Mean:
    """A (weighted) running mean; ``value`` is None until something was added."""

    __slots__ = ("total", "weight")

    def __init__(self) -> None:
        self.total = 0.0
        self.weight = 0.0

    def add(self, value: float | None, weight: float = 1.0) -> None:
        if value is None or weight <= 0:
            return
        self.total += value * weight
        self.weight += weight

    @property
    def value(self) -> float | None:
        return self.total / self.weight if self.weight > 0 else None


ConfigKey = tuple[str, str, int]


@dataclass
class Segment:
    """One stretch of one configuration."""

    key: ConfigKey
    start_s: float
    end_s: float
    means: dict[str, Mean] = field(default_factory=dict)
    first: dict[str, Mean] = field(default_factory=dict)  # the warm-up sample, used only if alone
    n_samples: int = 0
    energy_steps: list[tuple[float, int]] = field(default_factory=list)  # (energy_j, steps): first, last

    @property
    def label(self) -> str:
        w, v, b = self.key
        return f"{w}/{v} bs{b}"

    def add(self, metric: str, value: float | None, weight: float = 1.0, *, warmup: bool = False) -> None:
        target = self.first if warmup else self.means
        target.setdefault(metric, Mean()).add(value, weight)

    def mean(self, metric: str) -> float | None:
        if metric == "joules_per_step":
            return self.joules_per_step
        m = self.means.get(metric)
        if m is not None and m.value is not None:
            return m.value
        f = self.first.get(metric)
        return f.value if f is not None else None

    def note_energy(self, energy_j: float | None, steps: int) -> None:
        if energy_j is None:
            return
        if len(self.energy_steps) < 2:
            self.energy_steps.append((energy_j, steps))
        else:
            self.energy_steps[1] = (energy_j, steps)

    @property
    def joules_per_step(self) -> float | None:
        if len(self.energy_steps) < 2:
            return None
        (e0, s0), (e1, s1) = self.energy_steps
        return (e1 - e0) / (s1 - s0) if s1 > s0 and e1 >= e0 else None

    @property
    def duration_s(self) -> float:
        return max(0.0, self.end_s - self.start_s)


@dataclass(frozen=True)
class StatRow:
    key: str
    label: str
    unit: str
    better: int
    now: float | None
    mean: float | None
    prev: float | None

    @property
    def change_pct(self) -> float | None:
        if self.mean is None or self.prev is None or self.prev == 0:
            return None
        return (self.mean - self.prev) / abs(self.prev) * 100.0

    @property
    def verdict(self) -> int:
        """+1 the change is an improvement, -1 a regression, 0 neutral or unknown."""
        c = self.change_pct
        if c is None or self.better == 0 or abs(c) < 0.5:
            return 0
        return 1 if (c > 0) == (self.better > 0) else -1


@dataclass(frozen=True)
class Marker:
    time_s: float
    label: str
    kind: str


class DashState:
    """Everything the dashboard shows, built from messages; no I/O, no clock."""

    def __init__(self, maxlen: int = 600, mode: str = "window", max_segments: int = 64) -> None:
        self.mode = mode
        self.series: dict[str, Series] = {
            k: Series(maxlen, mode) for k in (*SAMPLE_METRICS, *GPU_METRICS, "temp_c")
        }
        self.markers: deque[Marker] = deque(maxlen=max(64, maxlen // 4))
        self.events: deque[Event] = deque(maxlen=200)
        self.segments: deque[Segment] = deque(maxlen=max_segments)
        self.gpu_info: GpuInfo | None = None
        self.last_sample: Sample | None = None
        self.last_gpu: GpuSample | None = None
        self.status = "starting"  # starting, running, paused, crashed, stopped
        self.status_message = ""
        self.last_error: Event | None = None
        self.workload = ""
        self.variant = ""
        self.batch_size = 0
        self.paused = False
        self.time_s = 0.0  # latest time seen (run time)
        self.n_messages = 0
        self._new_segment = True
        self._warmup_next = True
        self._settle_from = 0.0  # start of the current settling window (a change or a resume)
        self._energy_steps: deque[tuple[float, float, int]] = deque(maxlen=64)  # (t, energy_j, steps)
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

    def _time(self, raw: float) -> float:
        self.time_s = max(self.time_s, raw)
        return raw

    def _on_sample(self, s: Sample) -> None:
        t = self._time(s.time_s)
        self.last_sample = s
        self.workload, self.variant, self.batch_size = s.workload, s.variant, s.batch_size
        if self.status in ("starting", "stopped", "crashed"):
            self.status = "paused" if self.paused else "running"
        for k in SAMPLE_METRICS:
            self.series[k].append(t, getattr(s, k))
        key: ConfigKey = (s.workload, s.variant, s.batch_size)
        seg = self.segments[-1] if self.segments else None
        if seg is None or self._new_segment or seg.key != key:
            seg = Segment(key=key, start_s=t - s.interval_s, end_s=t)
            self.segments.append(seg)
            self._new_segment = False
            self._warmup_next = True
        seg.end_s = t
        energy = self.last_gpu.energy_j if self.last_gpu is not None else None
        if energy is not None:
            self._energy_steps.append((t, energy, s.steps))
        if self.paused:
            return
        warm = self._warmup_next or t - self._settle_from < SETTLE_S
        if self._warmup_next:
            self._settle_from = t - s.interval_s
        self._warmup_next = False
        seg.n_samples += 1
        seg.add("steps_per_s", s.steps_per_s, s.interval_s, warmup=warm)
        seg.add("samples_per_s", s.samples_per_s, s.interval_s, warmup=warm)
        for k in ("step_ms_p50", "step_ms_p95", "syncs_per_step"):
            seg.add(k, getattr(s, k), warmup=warm)
        if not warm:
            seg.note_energy(energy, s.steps)

    def _on_gpu(self, g: GpuSample) -> None:
        t = self._time(g.time_s)
        self.last_gpu = g
        for k in (*GPU_METRICS, "temp_c"):
            self.series[k].append(t, getattr(g, k))
        seg = self.segments[-1] if self.segments else None
        if seg is None or self.paused or self._new_segment or t < seg.start_s:
            return
        for k in ("gpu_util_pct", "mem_bw_util_pct", "power_w", "sm_clock_mhz", "mem_used_mib"):
            seg.add(k, getattr(g, k))

    def _on_event(self, e: Event) -> None:
        t = self._time(e.time_s)
        self.events.append(e)
        if e.kind in MARKER_KINDS:
            # the first start is the left edge of the run: no marker; a restart gets one
            if e.kind != EventKind.STARTED or self._started_once:
                self.markers.append(Marker(t, _marker_label(e), e.kind))
        if e.kind == EventKind.STARTED:
            self._started_once = True
        if e.kind == EventKind.STARTING:
            self.status, self.status_message = "starting", e.message
        elif e.kind == EventKind.STARTED:
            self.status, self.status_message = "running", e.message
            self.paused = False
            self._new_segment = True
        elif e.kind == EventKind.CHANGED:
            self._new_segment = True
            if e.what == "batch_size":
                try:
                    self.batch_size = int(float(e.after))
                except ValueError:
                    pass
            elif e.what == "variant":
                self.variant = e.after
            elif e.what == "workload":
                self.workload = e.after
        elif e.kind == EventKind.ERROR:
            self.last_error = e
        elif e.kind == EventKind.PAUSED:
            self.paused, self.status = True, "paused"
        elif e.kind == EventKind.RESUMED:
            self.paused, self.status = False, "running"
            self._warmup_next = True
        elif e.kind == EventKind.STOPPED:
            self.status, self.status_message = "stopped", e.message
        elif e.kind == EventKind.CRASHED:
            self.status, self.status_message = "crashed", e.message or "the workload process died"
            self.paused = False

    # -- read -----------------------------------------------------------------------------------
    def time_range(self) -> tuple[float, float]:
        """The shared time axis: every chart shows [t0, t1]."""
        nonempty = [s for s in self.series.values() if s.first_t is not None]
        lasts = [s.last_t for s in nonempty]
        t1 = max([*lasts, self.time_s]) if lasts else max(self.time_s, 1.0)
        if not nonempty:
            return 0.0, max(t1, 1.0)
        full = [s for s in nonempty if len(s) >= s.maxlen]
        if self.mode == "window" and full:
            # a full window has dropped its oldest points: start where every chart has data
            t0 = max(s.first_t for s in full)  # type: ignore[type-var]
        else:
            t0 = min(s.first_t for s in nonempty)  # type: ignore[type-var]
        if t1 - t0 < 1.0:
            t1 = t0 + 1.0
        return t0, t1

    def visible_markers(self, t0: float, t1: float) -> list[Marker]:
        return [m for m in self.markers if t0 <= m.time_s <= t1]

    @property
    def current(self) -> Segment | None:
        return self.segments[-1] if self.segments else None

    @property
    def previous(self) -> Segment | None:
        """The last segment before the current one with a different configuration."""
        cur = self.current
        for seg in reversed(list(self.segments)[:-1]):
            if cur is None or seg.key != cur.key:
                return seg
        return None

    def now(self, metric: str) -> float | None:
        if metric in SAMPLE_METRICS:
            return getattr(self.last_sample, metric) if self.last_sample is not None else None
        if metric == "joules_per_step":
            # over the last ~3 s: NVML ticks and samples do not line up, one interval aliases
            pts = self._energy_steps
            if len(pts) < 2:
                return None
            t1, e1, s1 = pts[-1]
            a = next((p for p in pts if t1 - p[0] <= NOW_WINDOW_S), pts[-2])
            if a[0] >= t1 and len(pts) >= 2:
                a = pts[-2]
            _, e0, s0 = a
            return (e1 - e0) / (s1 - s0) if s1 > s0 and e1 >= e0 else None
        return getattr(self.last_gpu, metric, None) if self.last_gpu is not None else None

    def stat_rows(self) -> list[StatRow]:
        cur, prev = self.current, self.previous
        return [
            StatRow(
                key=k,
                label=label,
                unit=unit,
                better=better,
                now=self.now(k),
                mean=cur.mean(k) if cur is not None else None,
                prev=prev.mean(k) if prev is not None else None,
            )
            for k, label, unit, better in STAT_METRICS
        ]

    def iter_segments(self) -> Iterator[Segment]:
        return iter(self.segments)


def _marker_label(e: Event) -> str:
    if e.kind == EventKind.CHANGED and e.what:
        what = {"batch_size": "batch", "variant": "", "workload": ""}.get(e.what, e.what)
        return f"{what} {e.before}→{e.after}".strip() if e.before else f"{what} {e.after}".strip()
    return e.kind


def fmt_num(v: float | None, width: int = 0) -> str:
    """A compact number: 3 significant figures, thousands as k; '–' when not available."""
    if v is None:
        s = "–"
    else:
        a = abs(v)
        if a >= 100_000:
            s = f"{v / 1000:.0f}k"
        elif a >= 10_000:
            s = f"{v / 1000:.1f}k"
        elif a >= 100:
            s = f"{v:.0f}"
        elif a >= 10:
            s = f"{v:.1f}"
        elif a >= 1:
            s = f"{v:.2f}"
        elif a == 0:
            s = "0"
        else:
            s = f"{v:.3f}"
    return s.rjust(width) if width else s


def fmt_pct(v: float | None) -> str:
    if v is None:
        return "–"
    return f"{v:+.1f}%"


def fmt_duration(seconds: float) -> str:
    s = max(0, int(seconds))
    h, rem = divmod(s, 3600)
    m, s = divmod(rem, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m:02d}:{s:02d}"
