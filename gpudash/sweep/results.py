"""The figures of a sweep: one configuration × repeat (``RepeatResult``, kept messages of its
measuring window) and one configuration over all its repeats (``ConfigSummary``), compared
with the family's first configuration at the same batch size. Torch-free.

The figures are ``gpudash.stats.figures``'s, as the dashboard's and the CSV's are: every finished
repeat's samples and NVML ticks, in time order, go into one ``Figures``, whose estimates
are the means with their 95% intervals; J/step comes from the energy marks inside each repeat
(none spans the gap between two repeats). Which figures: the catalog's ``FIGURE_KEYS``.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, field, replace

from gpudash.core.metrics import FIGURE_KEYS, Better, metric
from gpudash.core.protocol import GpuSample, Sample
from gpudash.core.stage_times import StageTimes
from gpudash.core.textfmt import fmt_num
from gpudash.stats.batch_means import MIN_SAMPLES_FOR_INTERVAL
from gpudash.stats.comparison import Comparison, Estimate, compare
from gpudash.stats.figures import JOULES_PER_STEP, Figures
from gpudash.stats.noise_tally import NoiseTally
from gpudash.sweep.plan import Configuration


def pct_of(e: Estimate | None, reference: float) -> Estimate | None:
    """``e`` as a percentage of ``reference`` (the interval scales with it)."""
    if e is None or reference <= 0:
        return None
    k = 100.0 / reference
    return Estimate(
        e.mean * k, None if e.low is None else e.low * k, None if e.high is None else e.high * k, e.n_samples
    )


@dataclass(frozen=True)
class RepeatResult:
    """One configuration × repeat: the samples kept after warm-up and the NVML ticks beside them."""

    config: Configuration
    repeat: int  # 1-based round number
    samples: tuple[Sample, ...] = ()
    gpu: tuple[GpuSample, ...] = ()
    error: str = ""  # why it failed ("" when measured)
    stages: StageTimes | None = None  # timed right after the window (two-stage families)

    @property
    def seconds(self) -> float:
        """The time the kept samples span."""
        return sum(s.interval_s for s in self.samples)

    @property
    def n_samples(self) -> int:
        """How many samples were kept."""
        return len(self.samples)

    @property
    def noise(self) -> NoiseTally:
        """How many of the kept samples were measured while the machine was noisy, and why."""
        tally = NoiseTally()
        for s in self.samples:
            tally.add(s.noise)
        return tally

    def figures(self) -> Figures:
        """The window's figures (``gpudash.stats.figures``): its samples and NVML ticks in time order."""
        figures = Figures()
        self.add_to(figures)
        return figures

    def add_to(self, figures: Figures) -> None:
        """Add the window to ``figures``; no energy increment spans the gap before it."""
        figures.break_marks()
        by_time = heapq.merge(
            ((s.time_s, 0, s) for s in self.samples), ((g.time_s, 1, g) for g in self.gpu), key=lambda item: item[:2]
        )  # a sample before a tick at the same time
        for _, _, msg in by_time:
            if isinstance(msg, Sample):
                figures.add_sample(msg)
            elif isinstance(msg, GpuSample):
                figures.add_gpu(msg)

    @property
    def joules_per_step(self) -> float | None:
        """J/step over the window (``energy.joules_per_step`` between its first and last mark)."""
        return self.figures().mean(JOULES_PER_STEP)

    def estimates(self) -> dict[str, Estimate | None]:
        """Each figure's mean (with its interval where the repeat is long enough)."""
        return accumulate([self])


def accumulate(results: list[RepeatResult]) -> dict[str, Estimate | None]:
    """Every figure over ``results`` (in time order), as ``gpudash.stats.figures`` computes it."""
    figures = Figures()
    for r in results:
        r.add_to(figures)
    return figures.estimates(FIGURE_KEYS)


@dataclass(frozen=True)
class ConfigSummary:
    """One configuration over its finished repeats, and how it compares with its family's base."""

    config: Configuration
    repeats: int  # repeats measured (failed ones not counted)
    seconds: float
    n_samples: int
    stats: dict[str, Estimate | None] = field(default_factory=dict)
    comparison: Comparison | None = None  # steps/s against ``base``
    base: Configuration | None = None  # None: this one is the base, or nothing to compare with
    error: str = ""
    stages: StageTimes | None = None  # each stage's mean over the repeats that timed them
    noise: str = ""  # "noisy: 40% of samples (host load)" when the repeats were (``NoiseTally.note``)

    @property
    def pct_of_bound(self) -> Estimate | None:
        """Steps/s as a percentage of the overlap bound, with its interval."""
        return None if self.stages is None else pct_of(self.steps, self.stages.bound)

    @property
    def steps(self) -> Estimate | None:
        """Steps/s over every measured repeat, with its interval."""
        return self.stats.get("steps_per_s")

    @property
    def seconds_for_interval(self) -> int | None:
        """The ``--seconds`` per repeat after which steps/s would have an interval, from the
        observed length of a sample (None: it has one, or nothing was measured)."""
        if self.steps is None or self.steps.has_interval or self.n_samples == 0 or self.repeats == 0:
            return None
        per_sample = self.seconds / self.n_samples
        return max(1, math.ceil(MIN_SAMPLES_FOR_INTERVAL * per_sample / self.repeats))

    def too_short_advice(self) -> str:
        """ "too short: 0.40 steps/s, use --seconds ≥ 15" ('' when steps/s has an interval)."""
        need = self.seconds_for_interval
        if need is None or self.steps is None:
            return ""
        return f"too short: {fmt_num(self.steps.mean)} steps/s, use --seconds ≥ {need}"

    @property
    def is_base(self) -> bool:
        """The configuration the others at its batch size are compared with."""
        return self.steps is not None and self.base is None


def summarize_one(config: Configuration, results: list[RepeatResult]) -> ConfigSummary:
    """``config`` over its repeats (results of other configurations are ignored)."""
    mine = [r for r in results if r.config == config]
    good = [r for r in mine if not r.error]
    error = next((r.error for r in mine if r.error), "")
    return ConfigSummary(
        config=config,
        repeats=len(good),
        seconds=sum(r.seconds for r in good),
        n_samples=sum(r.n_samples for r in good),
        stats=accumulate(good) if good else {},
        error=error,
        stages=StageTimes.mean_of([r.stages for r in good if r.stages is not None]),
        noise=sum((r.noise for r in good), NoiseTally()).note(),
    )


def summarize(configs: tuple[Configuration, ...], results: list[RepeatResult]) -> list[ConfigSummary]:
    """Each configuration's summary; each compared (steps/s, new/base) with the first listed
    configuration at its batch size that was measured."""
    raw = [summarize_one(c, results) for c in configs]
    bases: dict[int, ConfigSummary] = {}
    for s in raw:
        if s.steps is not None:
            bases.setdefault(s.config.batch_size, s)
    higher = metric("steps_per_s").better != Better.LOWER
    out: list[ConfigSummary] = []
    for s in raw:
        base = bases.get(s.config.batch_size)
        if base is None or base is s or s.steps is None or base.steps is None:
            out.append(s)
            continue
        out.append(replace(s, comparison=compare(base.steps, s.steps, higher_is_better=higher), base=base.config))
    return out


def wide_intervals(summaries: list[ConfigSummary], pct: float) -> list[tuple[ConfigSummary, float | None]]:
    """The measured configurations whose steps/s interval is wider than ±``pct``% (None: no
    interval yet), with their relative half-width in percent."""
    wide: list[tuple[ConfigSummary, float | None]] = []
    for s in summaries:
        if s.error or s.steps is None:
            continue
        rel = s.steps.rel_half_width
        if rel is None or rel * 100 > pct:
            wide.append((s, None if rel is None else rel * 100))
    return wide
