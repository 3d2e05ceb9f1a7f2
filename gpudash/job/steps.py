"""A job's step records into the samples every run has: windows of ``interval_s`` seconds of the
job's steps (by the host time of each step's boundary), rank 0's as the run's ``Sample`` (its
samples times the ranks: the global batch, as the data-parallel families count it), with the
slowest rank's step time where there are others, and (once the job's count is in) the model FLOPs,
TFLOP/s and MFU of ``gpudash.job.mfu``. Torch-free.

**Steps as steps.** A window's rates come from the durations of the steps that ended in it — each
step's training seconds since the step before, evaluation, checkpoints and compilation left out (the
hooks' ``train_s``) — not from a count per interval: its steps/s is its steps over their seconds,
and ``Sample.train_s`` carries those seconds, which the statistics weigh it by
(``gpudash.stats.figures``), so a configuration's rate is its steps over the time spent in training
steps. A window in which no step ended while one is under way reads the last rate, or less once the
step takes longer than that (a 10 s step reads 0.1 steps/s, not 0, 0, 0, 0.4; the first timed step,
before any rate, reads one over its seconds so far, falling; a step found computing past the stall's
threshold, ``working_after``, goes on falling), and weighs nothing. A window with a step under a profiler
window (a trace, a diagnosis) weighs nothing either: it is shown, not counted. Without a batch size
(no ``DataLoader``) samples/s is unknown (None).

The record itself, and the bounds a hostile one is refused by: ``gpudash.job.step_record``.
"""

from __future__ import annotations

import collections
import statistics
from dataclasses import dataclass, field

from gpudash.core.protocol import RankSample, Sample
from gpudash.engine.measure import percentile
from gpudash.engine.model_flops import ModelCount, with_model_rates
from gpudash.host.runner import with_slowest_rank
from gpudash.job.shape_steps import ShapeSteps
from gpudash.job.step_record import StepRecord

BATCH_FROM_STEPS = 10  # the job's batch size: the most common of its first steps' sample counts
LAG_S = 0.5  # a window closes this long after its end: its steps' records arrive late
HOLD_ZERO_S = 3.0  # a window without a step goes out when a later one has steps, or after this long
LATE_STEPS = 2.0  # a step under way reads the last rate, falling, until it takes this many of its usual
MEDIAN_OF = 64  # the latest step durations the median step is taken over
RAN_STEPS = 4096  # the lead rank's latest step records kept: a diagnosis of a job that ended first is over them
EARLY_SPLIT = 8  # the first windows of a job of short steps are this many times shorter ...
EARLY_WINDOWS = 2 * EARLY_SPLIT  # ... this many of them (two sample intervals in all) ...
EARLY_MIN_STEPS = 4  # ... where a short window still holds about this many median steps


@dataclass
class RankWindows:
    """One rank's steps: the totals and the window being filled."""

    steps: int = 0  # the last step received
    samples: int = 0
    closed_steps: int = 0  # the last step of the windows closed so far
    closed_samples: int = 0  # ... and their samples (a sample's totals)
    window: list[StepRecord] = field(default_factory=list)
    first_counts: list[int] = field(default_factory=list)  # the first steps' samples
    last_t: float | None = None  # the latest step's end (monotonic)
    largest: int = 0  # the most samples a step had, the first step's left out (a batch fetched ahead)

    def add(self, record: StepRecord) -> None:
        self.window.append(record)
        self.last_t = record.t if self.last_t is None else max(self.last_t, record.t)
        self.steps = max(self.steps, record.step)
        self.samples += record.samples
        if self.first_counts:
            self.largest = max(self.largest, record.samples)
        if len(self.first_counts) < BATCH_FROM_STEPS:
            self.first_counts.append(record.samples)

    @property
    def batch_size(self) -> int:
        """The most common sample count of the first steps (a framework that fetches a batch
        ahead makes its first step's count larger)."""
        counts = [n for n in self.first_counts if n > 0]
        return statistics.mode(counts) if counts else 0


@dataclass(frozen=True)
class WindowFigures:
    """What one window of a rank's steps says."""

    steps: int
    samples: int
    step_ms_p50: float | None
    step_ms_p95: float | None
    syncs_per_step: float | None
    timed_steps: int = 0  # the steps whose training seconds are known
    timed_samples: int = 0  # ... and their samples
    train_s: float = 0.0  # ... and those seconds
    profiled: bool = False  # a step of the window ran under a profiler window or the FLOP counter
    steps_per_s: float | None = None  # steps over their training seconds (None: no timed step ended in it)


def window_figures(records: list[StepRecord], steady_known: bool = True) -> WindowFigures:
    """The window's step count, samples, step time percentiles (profiled steps left out), syncs
    per step, and its timed steps' training seconds. Its rate is each process's steps over its
    seconds, summed: processes that step at once as one rank (Hogwild) add up; the seconds it
    weighs in the statistics are the mean of theirs. A compiled job's steps at a new shape are said
    apart (``shape_steps``) and left out of it, once the job has made a step at a shape already
    compiled (``steady_known``: else, a job whose shapes never repeat, its rate is all its steps')."""
    ms = sorted(r.ms for r in records if r.ms is not None and not r.profiled)
    syncs = [r.syncs for r in records if r.syncs is not None]
    timed = [r for r in records if r.train_s is not None]
    if steady_known:
        timed = [r for r in timed if not r.new_shape]
    by_pid: dict[int, list[float]] = {}
    for r in timed:
        by_pid.setdefault(r.pid, []).append(r.train_s or 0.0)
    rates = [len(seconds) / sum(seconds) for seconds in by_pid.values() if sum(seconds) > 0]
    n = len(records)
    return WindowFigures(
        steps=n,
        samples=sum(r.samples for r in records),
        step_ms_p50=percentile(ms, 50) if ms else None,
        step_ms_p95=percentile(ms, 95) if ms else None,
        syncs_per_step=statistics.fmean(syncs) if syncs else None,
        timed_steps=len(timed),
        timed_samples=sum(r.samples for r in timed),
        train_s=sum(sum(seconds) for seconds in by_pid.values()) / max(1, len(by_pid)),
        profiled=any(r.profiled for r in records),
        steps_per_s=sum(rates) if rates else None,
    )


class JobSamples:
    """Step records in, samples out: ``add`` each record, ``due(now)`` the samples of every window
    that has ended by ``now`` (monotonic)."""

    def __init__(self, workload: str, variant: str, interval_s: float, t0: float) -> None:
        self.workload, self.variant = workload, variant
        self.interval_s = interval_s
        self.t0 = t0
        self.ranks: dict[int, RankWindows] = {}
        self.world_size = 1
        self.window_start: float | None = None  # monotonic
        self.last: Sample | None = None
        self.rank_samples: dict[int, RankSample] = {}  # each rank's latest window (several ranks)
        self.new_rank_samples: list[RankSample] = []  # the windows closed since the session took them
        self.held: list[Sample] = []  # windows without a step, not sent yet (see ``due``)
        self.count: ModelCount | None = None  # the job's model FLOPs a step, and the peak (MFU)
        self.away = False  # the job is in a phase other than training now (evaluation, a checkpoint, a stall)
        self.working_after: float | None = None  # the step after this step end computes (gpudash.job.stall_probe)
        self.rate: float | None = None  # the lead rank's latest steps/s from its steps' durations
        self.durations: list[float] = []  # the lead rank's latest step durations (seconds), for the median
        self.ran: collections.deque[StepRecord] = collections.deque(maxlen=RAN_STEPS)  # the lead rank's latest steps
        self.last_step_t: float | None = None  # the lead rank's latest step end (monotonic)
        self.blind_spans: list[tuple[float, float]] = []  # when gpudash could not listen (monotonic)
        self.input_shares: dict[int, float] = {}  # each rank's input wait over its training seconds, last window
        self.own_work: dict[int, tuple[list[float], list[float]]] = {}  # each rank's (own, comm) ms a step, last window
        self.windows_closed = 0
        self.shapes = ShapeSteps()  # the lead rank's steps at a new shape (compiled), against its steady ones

    def add(self, rank: int, record: StepRecord) -> None:
        self.ranks.setdefault(rank, RankWindows()).add(record)
        if self.window_start is None:
            self.window_start = record.t
        if rank == min(self.ranks):
            self.ran.append(record)
            self.shapes.add(record)
            self.last_step_t = max(self.last_step_t or record.t, record.t)
            if record.train_s is not None and record.train_s > 0:
                self.durations.append(record.train_s)
                del self.durations[:-MEDIAN_OF]

    def blind(self, since: float, until: float) -> None:
        """gpudash did not listen from ``since`` to ``until`` (it was stopped): what the job sent then
        may be lost, so the windows inside are unknown; they are not sent (no zero throughput)."""
        self.blind_spans.append((since, until))
        del self.blind_spans[:-8]

    def _unseen(self, start: float, end: float) -> bool:
        return any(since <= start and end <= until + LAG_S for since, until in self.blind_spans)

    @property
    def median_step_s(self) -> float | None:
        """The lead rank's median step duration over its latest steps (None: none timed yet)."""
        return statistics.median(self.durations) if self.durations else None

    @property
    def batch_known(self) -> bool:
        """The job's batches come from a ``DataLoader`` (its samples are counted)."""
        lead = self.ranks.get(min(self.ranks, default=0))
        return lead is not None and lead.batch_size > 0

    @property
    def steps(self) -> int:
        lead = self.ranks.get(min(self.ranks, default=0))
        return lead.steps if lead is not None else 0

    def due(self, now: float) -> list[Sample]:
        """The samples of the windows that ended by ``now``. A window without a step is held back
        until a later one has steps (a pause: its zero goes out then) or ``HOLD_ZERO_S`` have
        passed (the job stalled, or does something else: it goes out); the job's end drops it
        (its teardown is not training at zero steps a second)."""
        out: list[Sample] = []
        start = self.window_start
        if start is None or not self.ranks:
            return out
        while now >= start + (length := self._window_s()) + LAG_S:
            end = start + length
            sample = self._close(end, length)
            if self._unseen(start, end):
                pass  # gpudash was not listening: unknown, not sent
            elif sample.steps_per_s > 0:
                out.extend(self.held)
                self.held = []
                out.append(sample)
            else:
                self.held.append(sample)
            start = end
        self.window_start = start
        if self.held and now - (self.held[0].time_s + self.t0) >= HOLD_ZERO_S:
            out.extend(self.held)
            self.held = []
        return out

    def _window_s(self) -> float:
        """The next window's length: ``interval_s``; for a job of short steps, its first
        ``EARLY_WINDOWS`` are ``EARLY_SPLIT`` times shorter (each still about ``EARLY_MIN_STEPS``
        steps or more), so a run of a second or two has windows enough for an interval."""
        short = self.interval_s / EARLY_SPLIT
        median = self.median_step_s
        if self.windows_closed < EARLY_WINDOWS and median is not None and EARLY_MIN_STEPS * median <= short:
            return short
        return self.interval_s

    def flush(self) -> list[Sample]:
        """At the job's end: the windows up to its last step, the last one rated over the stretch
        it covers (up to that step), and no empty window after."""
        last = max((r.t for w in self.ranks.values() for r in w.window), default=None)
        start = self.window_start
        if last is None or start is None:
            self.held = []
            return []
        out = self.due(last + LAG_S)  # every full window before the last step's
        start = self.window_start or start
        lead = self.ranks[min(self.ranks)].window
        ms = sorted(r.ms for r in lead if r.ms is not None)
        at_least = len(lead) * ms[len(ms) // 2] / 1e3 if ms else 1e-3  # one step just after the start
        final = self._close(last + 1e-9, max(last - start, at_least))
        if final.steps > 0:
            out.extend(self.held)
            out.append(final)
        self.held = []
        return out

    def _close(self, end: float, interval_s: float) -> Sample:
        """The window ending at ``end``: rank 0's sample, with the slowest rank where there are others."""
        lead = min(self.ranks)
        world = max(self.world_size, len(self.ranks))
        time_s = end - self.t0
        figures = {}
        for rank, windows in self.ranks.items():
            inside = [r for r in windows.window if r.t < end]
            windows.window = [r for r in windows.window if r.t >= end]
            figures[rank] = fig = window_figures(inside, steady_known=self.shapes.steady_steps > 0)
            timed = [r for r in inside if r.train_s]
            if timed:
                seconds = sum(r.train_s or 0.0 for r in timed)
                self.input_shares[rank] = min(1.0, sum(r.input_wait_s for r in timed) / seconds)
            worked = [r for r in timed if r.own_ms is not None and not r.profiled]
            self.own_work[rank] = ([r.own_ms or 0.0 for r in worked], [r.comm_ms or 0.0 for r in worked])
            windows.closed_steps = max([windows.closed_steps, *(r.step for r in inside)])
            windows.closed_samples += fig.samples
        self.windows_closed += 1
        if world > 1:
            self._rank_windows(time_s, interval_s, figures)
        windows, fig = self.ranks[lead], figures[lead]
        steps_per_s, train_s = self._rate(fig, end)
        per_step = fig.timed_samples / fig.timed_steps if fig.timed_steps else windows.batch_size
        sample = Sample(
            time_s=time_s,
            workload=self.workload,
            variant=self.variant,
            batch_size=windows.batch_size * world,
            steps=windows.closed_steps,
            samples=windows.closed_samples * world,
            interval_s=interval_s,
            steps_per_s=steps_per_s,
            samples_per_s=steps_per_s * per_step * world if self.batch_known else None,
            train_s=train_s,
            step_ms_p50=fig.step_ms_p50,
            step_ms_p95=fig.step_ms_p95,
            syncs_per_step=fig.syncs_per_step,
            world_size=world,
        )
        sample = with_model_rates(sample, self.count)
        if self.rank_samples:
            sample = with_slowest_rank(sample, self.rank_samples)
        self.last = sample
        return sample

    def _rank_windows(self, time_s: float, interval_s: float, figures: dict[int, WindowFigures]) -> None:
        """Each rank's figures over the window (``rank_samples``; the new ones in ``new_rank_samples``)."""
        for rank, fig in figures.items():
            rate = fig.steps_per_s if fig.steps_per_s is not None else fig.steps / interval_s
            per_step = fig.timed_samples / fig.timed_steps if fig.timed_steps else self.ranks[rank].batch_size
            share = self.input_shares.get(rank)
            own, comm = self.own_work.get(rank, ([], []))
            self.rank_samples[rank] = RankSample(
                time_s,
                rank,
                self.ranks[rank].closed_steps,
                rate,
                fig.step_ms_p50,
                samples_per_s=rate * per_step if self.batch_known else None,
                input_wait_pct=100.0 * share if share is not None else None,
                own_ms=statistics.median(own) if own else None,
                comm_ms=statistics.median(comm) if comm else None,
            )
        self.new_rank_samples.extend(self.rank_samples[rank] for rank in sorted(figures))

    def _last_step_before(self, end: float) -> float | None:
        """The lead rank's latest step end before ``end`` (a window closes after records of later
        steps may have come in)."""
        for record in reversed(self.ran):
            if record.t < end:
                return record.t
        return None

    def _rate(self, fig: WindowFigures, end: float) -> tuple[float, float]:
        """(steps/s, the training seconds it weighs in the statistics) of the lead rank's window:
        its timed steps over their seconds; with no step ended in it, the last rate while a step
        is under way (falling once it runs late; before any, one over the seconds since the first
        step), 0 in another phase; weight 0 for a window with a
        profiled step or none timed."""
        rate = fig.steps_per_s
        if rate is not None:
            self.rate = rate
            return rate, 0.0 if fig.profiled else fig.train_s
        last = self._last_step_before(end)
        if fig.steps or self.away or last is None:
            return (self.rate or 0.0) if fig.steps else 0.0, 0.0
        since = max(end - last, 1e-9)
        if self.rate is None:
            return 1.0 / since, 0.0  # the first timed step under way: at most this, falling
        usual = 1.0 / self.rate
        late = since > LATE_STEPS * max(usual, self.median_step_s or usual)
        if late and last != self.working_after:
            return 0.0, 0.0  # late: a phase gpudash cannot name, or a stall
        return min(self.rate, 1.0 / since), 0.0
