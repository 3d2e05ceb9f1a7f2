"""One configuration's figures, computed one way for every surface. Torch/Textual-free.

``Figures`` takes a configuration's samples (the workload's), GPU ticks (NVML) and energy
marks, and gives each averaged metric of the catalog (``gpudash.core.metrics``) as a mean with its
95% interval (``gpudash.stats.batch_means.BatchMeans``; over a sweep's repeats ``Stretches``,
whose interval also counts how the repeats differ). The dashboard's and the CSV's segments
(``gpudash.stats.segments``), a sweep's repeats and summaries (``gpudash.sweep.results``) and
``gpudash report`` all read their figures from it, so the same samples give the same numbers
wherever they are shown.

- Rates (``Averaging.TIME``) are weighted by each sample's interval — a job's sample by its
  seconds of training steps (``Sample.train_s``), so that a job's rate is its steps over the time
  spent in training steps, and a sample of evaluation, a checkpoint or a stall weighs nothing; a
  job's window of one long step (two intervals of training or more) is a batch by itself
  (``gpudash.stats.batch_means``: its interval comes from the steps' own durations);
  other averaged metrics count each value once (a sample that weighs nothing, not at all);
  NVML's metrics count each tick once.
- J/step (``Averaging.ENDS``): an energy *mark* is NVML's energy counter at a tick joined with the
  step count of the newest sample by then. Between successive marks, ΔJ/Δsteps is one value
  weighted by its steps, so the mean is (last energy − first) / (last steps − first), as
  ``gpudash.stats.energy.joules_per_step`` defines it, and the interval comes from the marks
  in between. A counter that goes back (a restart) starts afresh.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gpudash.core.metrics import METRICS, Averaging, Origin
from gpudash.core.protocol import GpuSample, Sample
from gpudash.stats.batch_means import MIN_PER_BATCH, Stretches, is_alone, seconds_for_interval
from gpudash.stats.comparison import Estimate

SAMPLE_MEANS = tuple(m for m in METRICS if m.origin in (Origin.WORKLOAD, Origin.MODEL) and m.mean is not None)
GPU_MEANS = tuple(m for m in METRICS if m.origin.from_gpu and m.mean is not None)
ENDS_KEYS = tuple(m.key for m in METRICS if m.mean == Averaging.ENDS)  # joules_per_step
JOULES_PER_STEP = "joules_per_step"

Mark = tuple[float, int]  # (NVML energy counter in J, steps done by then)


@dataclass
class EnergyMarks:
    """J/step between successive energy marks, each weighted by its steps."""

    per_step: Stretches = field(default_factory=Stretches)
    last: Mark | None = None

    def add(self, energy_j: float, steps: int) -> None:
        """A mark; a mark with no new step merges into the next."""
        if self.last is None:
            self.last = (energy_j, steps)
            return
        e0, s0 = self.last
        if energy_j < e0 or steps < s0:  # the counter reset (another GPU, a restart): start afresh
            self.last = (energy_j, steps)
        elif steps > s0:
            self.per_step.add((energy_j - e0) / (steps - s0), steps - s0)
            self.last = (energy_j, steps)


@dataclass
class Figures:
    """Every averaged metric of one configuration (or of one part of it, such as its warm-up)."""

    means: dict[str, Stretches] = field(default_factory=dict)
    energy: EnergyMarks = field(default_factory=EnergyMarks)
    steps_now: int | None = None  # the newest sample's step count: what the next energy mark joins

    def add_sample(self, s: Sample) -> None:
        """A workload sample: each averaged workload metric, rates weighted by the interval."""
        span = s.interval_s if s.train_s is None else s.train_s
        alone = is_alone(s.interval_s, s.train_s)  # a long step's window: a batch by itself
        for m in SAMPLE_MEANS:
            weight = span if m.mean == Averaging.TIME else (1.0 if span > 0 else 0.0)
            self.means.setdefault(m.key, Stretches()).add(getattr(s, m.key), weight, alone)
        self.steps_now = s.steps

    def add_gpu(self, g: GpuSample) -> None:
        """An NVML tick: each averaged NVML metric once, and an energy mark after the first sample."""
        for m in GPU_MEANS:
            self.means.setdefault(m.key, Stretches()).add(getattr(g, m.key))
        if g.energy_j is not None and self.steps_now is not None:
            self.energy.add(g.energy_j, self.steps_now)

    def break_marks(self) -> None:
        """A gap in the configuration's run (the next repeat of a sweep): no energy increment spans
        it, and what follows is another stretch (``batch_means.estimate_over_stretches``)."""
        self.energy.last = None
        self.steps_now = None
        self.energy.per_step.new_stretch()
        for acc in self.means.values():
            acc.new_stretch()

    def seconds_to_interval(self, key: str, interval_s: float) -> float:
        """About how much longer ``key`` needs for an interval, its samples ``interval_s`` apart;
        where each is a long step's window (a batch alone), counted in those steps' mean seconds."""
        acc = self.means.get(key)
        if acc is None or acc.n == 0:
            return seconds_for_interval(0, interval_s)
        if acc.units >= MIN_PER_BATCH * acc.n:
            return seconds_for_interval(acc.n, acc.weight / acc.n, alone=True)
        return seconds_for_interval(acc.n, interval_s)

    def estimate(self, key: str) -> Estimate | None:
        """``key``'s mean with its interval (None: no value yet)."""
        acc = self.energy.per_step if key == JOULES_PER_STEP else self.means.get(key)
        return acc.estimate() if acc is not None else None

    def mean(self, key: str) -> float | None:
        e = self.estimate(key)
        return None if e is None else e.mean

    def estimates(self, keys: tuple[str, ...]) -> dict[str, Estimate | None]:
        return {key: self.estimate(key) for key in keys}
