"""Stretches of one configuration and their statistics, built from messages. Torch/Textual-free.

A *segment* is one configuration (workload, variant, batch size, knobs) for as long as it runs: a
``changed`` event, a (re)start, or a sample of another configuration starts a new one. Its
statistics use every sample and NVML tick (not the charts' bounded series) except those of the
first ``SETTLE_S`` seconds after a change or a resume (rebuild, allocator and loader warm-up land
there; they count only while nothing else has come; a user's job's: the windows that hold any of
its first ``JOB_WARMUP_STEPS`` steps, within ``SETTLE_S`` at most, its figures then said over a
number of steps), none while paused, nor
— a user's job — while it is in a phase other than training (evaluation, a checkpoint, a stall: ``PHASE`` events;
its samples weigh only their training seconds, ``gpudash.stats.figures``). The figures are
``gpudash.stats.figures``'s, as a sweep's are: each averaged metric a mean *and* an interval,
J/step from the energy marks after warm-up.

``SegmentTracker`` is shared by the dashboard (``DashState``) and the CSV recorder, which
writes a summary event row for each segment that ends: the screen and the file agree.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from gpudash.core.events import OPTIMIZER_STEPS
from gpudash.core.metrics import Better, metric
from gpudash.core.protocol import Event, EventKind, GpuSample, Sample
from gpudash.core.running import ConfigKey
from gpudash.core.textfmt import plain, plain_pm
from gpudash.stats.comparison import Comparison, Estimate, compare
from gpudash.stats.figures import JOULES_PER_STEP, Figures
from gpudash.stats.noise_tally import NoiseTally

SETTLE_S = 1.0  # seconds after a change or resume left out of the configuration's statistics
JOB_WARMUP_STEPS = 10  # a job's warm-up: the windows that hold any of its first this many steps (in SETTLE_S at most)


@dataclass
class Segment:
    """One stretch of one configuration: its figures after warm-up, and those of its warm-up."""

    key: ConfigKey
    start_s: float
    end_s: float
    figures: Figures = field(default_factory=Figures)
    first: Figures = field(default_factory=Figures)  # warm-up, used only if alone
    n_samples: int = 0
    noise: NoiseTally = field(default_factory=NoiseTally)  # the samples after warm-up: how many noisy
    job: bool = False  # a user's job's: its warm-up and its figures are counted in steps
    start_steps: int = 0  # the run's steps before the segment's first window
    warmup_steps: int = 0  # a job's steps left out as warm-up ...
    counted_steps: int = 0  # ... and those its figures are over
    steps_counted: str = ""  # a job's: how its steps are counted ("backward passes …"; "": optimizer steps)

    @property
    def label(self) -> str:
        w, v, b, knobs = self.key
        return f"{w}/{v} bs{b or '–'}" + (f" [{knobs}]" if knobs != "none" else "")  # 0: not known (a job)

    @property
    def duration_s(self) -> float:
        return max(0.0, self.end_s - self.start_s)

    def mean(self, key: str) -> float | None:
        """The mean after warm-up; during the warm-up (nothing after it yet), the warm-up's."""
        for source in (self.figures, self.first):
            value = source.mean(key)
            if value is not None:
                return value
        return None

    def estimate(self, key: str) -> Estimate | None:
        """The mean after warm-up with its interval (None: nothing after warm-up yet)."""
        return self.figures.estimate(key)

    def needs_s(self, key: str, interval_s: float) -> float | None:
        """About how much longer ``key`` needs for an interval after warm-up (None: it has one), its
        samples ``interval_s`` apart (a job's long steps: counted in steps, ``Figures``)."""
        e = self.estimate(key)
        if e is not None and e.has_interval:
            return None
        return self.figures.seconds_to_interval(key, interval_s)

    @property
    def joules_per_step(self) -> float | None:
        """J/step after warm-up (``gpudash.stats.figures``)."""
        return self.figures.mean(JOULES_PER_STEP)

    def summary(self, key: str = "steps_per_s") -> str:
        """One line: "encdec/serial bs8: steps/s 231.4 ± 3.2 (95% CI, 120 samples after warm-up)"; a
        job's in steps: "job:train.py bs64: steps/s 502 ± 9 (95% CI over 380 steps; warm-up: the
        first 20)"."""
        m = metric(key)
        e = self.estimate(key)
        if self.job:
            return f"{self.label}: {m.label} {self._job_figure(e)}"
        if e is None:
            return f"{self.label}: {m.label} – (no samples after warm-up)"
        noisy = f"; {note}" if (note := self.noise.note()) else ""
        if not e.has_interval:
            return f"{self.label}: {m.label} {plain(e.mean)} (too short for an interval, {e.n_samples} samples{noisy})"
        return (
            f"{self.label}: {m.label} {plain_pm(e.mean, e.half_width)} "
            f"(95% CI, {e.n_samples} samples after warm-up{noisy})"
        )

    def _job_figure(self, e: Estimate | None) -> str:
        """A job's figure: over how many of its steps, and how many were left out as warm-up."""
        warmup = f"warm-up: the first {self.warmup_steps}"
        if e is None:
            return f"– (no step after the warm-up; {warmup})"
        noisy = f"; {note}" if (note := self.noise.note()) else ""
        counted = f"; steps: {self.steps_counted}" if self.steps_counted else ""  # not the optimizer's
        if not e.has_interval:
            return (
                f"{plain(e.mean)} (over {self.counted_steps} steps, too few for an interval; {warmup}{counted}{noisy})"
            )
        return f"{plain_pm(e.mean, e.half_width)} (95% CI over {self.counted_steps} steps; {warmup}{counted}{noisy})"


def incomparable(prev: ConfigKey, cur: ConfigKey, key: str) -> str | None:
    """Why ``key`` of configuration ``cur`` is not compared with ``prev``'s (None: like with like):
    another workload ("new workload"), or another batch size for a figure that scales with it
    ("batch size changed": steps/s, step times and J/step; samples/s and the GPU's figures are
    compared)."""
    if prev[0] != cur[0]:
        return "new workload"
    if prev[2] != cur[2] and metric(key).per_batch:
        return "batch size changed"
    return None


def compare_segments(prev: Segment | None, cur: Segment | None, key: str) -> Comparison | None:
    """``cur`` against ``prev`` for one metric, with the metric's direction of better (None:
    nothing to compare, or not like with like: ``incomparable``)."""
    if prev is None or cur is None or incomparable(prev.key, cur.key, key) is not None:
        return None
    a, b = prev.estimate(key), cur.estimate(key)
    if a is None or b is None:
        return None
    return compare(a, b, higher_is_better=metric(key).better != Better.LOWER)


class SegmentTracker:
    """Splits a run's messages into segments (bounded: the latest ``max_segments``)."""

    def __init__(self, max_segments: int = 64) -> None:
        self.segments: deque[Segment] = deque(maxlen=max_segments)
        self.paused = False
        self._new_segment = True
        self._warmup_next = True
        self._settle_from = 0.0  # start of the current settling window (a change or a resume)
        self.away = False  # a job's phase other than training is under way: its NVML ticks are not training's
        self.steps_counted = ""  # a job's steps, where not optimizer steps: how they are counted (its started event)
        self._steps = 0  # the run's steps at the latest sample

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

    def on_sample(self, s: Sample) -> Segment | None:
        """Count a sample; returns the segment it ended (a new configuration began), if any."""
        t = s.time_s
        key: ConfigKey = (s.workload, s.variant, s.batch_size, s.knobs)
        seg, ended = self.current, None
        job = s.train_s is not None  # a user's job's sample: its window's training seconds
        if seg is None or self._new_segment or seg.key != key:
            ended = seg
            seg = Segment(key=key, start_s=t - s.interval_s, end_s=t, job=job, start_steps=self._steps)
            seg.steps_counted = self.steps_counted
            self.segments.append(seg)
            self._new_segment = False
            self._warmup_next = True
        seg.end_s = t
        window_steps, self._steps = max(0, s.steps - self._steps), s.steps
        if self.paused:
            return ended
        if self._warmup_next:
            self._settle_from = t - s.interval_s
        if job:  # the windows that hold any of its first JOB_WARMUP_STEPS steps, in its first SETTLE_S at most
            early = t - s.interval_s - self._settle_from < SETTLE_S
            warm = early and s.steps - window_steps - seg.start_steps < JOB_WARMUP_STEPS
            if warm:
                seg.warmup_steps += window_steps
            else:
                seg.counted_steps += window_steps
        else:
            warm = self._warmup_next or t - self._settle_from < SETTLE_S
        self._warmup_next = False
        seg.n_samples += 1
        (seg.first if warm else seg.figures).add_sample(s)
        if not warm:
            seg.noise.add(s.noise)
        return ended

    def on_gpu(self, g: GpuSample) -> None:
        """An NVML tick, into the current segment's warm-up or its figures."""
        seg = self.current
        if seg is None or self.paused or self.away or self._new_segment or g.time_s < seg.start_s:
            return
        warm = self._warmup_next or g.time_s - self._settle_from < SETTLE_S
        (seg.first if warm else seg.figures).add_gpu(g)

    def on_event(self, e: Event) -> None:
        if e.kind == EventKind.PHASE:
            self.away = not e.after  # begun (no seconds yet), or ended
        elif e.kind in (EventKind.STARTED, EventKind.CHANGED):
            self._new_segment = True
            if e.kind == EventKind.STARTED:
                self.paused = False
                counted = e.details.get("steps", "")  # a job's: how its steps are counted
                self.steps_counted = "" if counted in ("", OPTIMIZER_STEPS) else counted
        elif e.kind == EventKind.PAUSED:
            self.paused = True
        elif e.kind == EventKind.RESUMED:
            self.paused = False
            self._warmup_next = True
        elif e.kind == EventKind.CRASHED:
            self.paused = False
