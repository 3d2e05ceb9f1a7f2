"""A job's phases as the dashboard shows them: the spans of its wall time that were not training
(startup, evaluation, checkpoints, compiling, other work between steps, stalls, the job stopped,
gpudash's own profiler windows, teardown: ``EventKind.PHASE``), the phase now, its latest stall
report and its goodput. Textual-free;
``DashState`` feeds it, from the events alone, so a replayed job (whose events keep their
``what``, ``after`` and message, not their details) shows the same.

Run time throughout (seconds since the run's start). A phase told ended after ``after`` seconds
at ``time_s`` spans ``[time_s - after, time_s]`` (startup, told late, spans ``[0, after]``); one
told begun spans ``[time_s, …)`` (a stall, told once it has lasted, from the last step) until its
end replaces it, or an end of 0 s says it was none.
Training is the rest, from the first step to the run's end. **Goodput** is the training seconds
(the samples' ``train_s``) over the wall time less what was not the job's own (``NOT_THE_JOBS``:
stopped, gpudash's profiling), as the job's own account has it; once the job has ended, that
account (the ``GOODPUT`` event).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from gpudash.core.goodput import Goodput, span_of
from gpudash.core.protocol import (
    ENDING_KINDS,
    GOODPUT,
    NOT_THE_JOBS,
    STALLED_PHASE,
    STARTUP,
    TRAINING,
    Event,
    EventKind,
    Sample,
)

MAX_SPANS = 10_000  # ended spans kept (the oldest go first): hours of an evaluation a minute


@dataclass(frozen=True)
class Span:
    """A stretch of a phase other than training; ``end_s`` None: under way."""

    start_s: float
    end_s: float | None
    phase: str


class PhaseTimeline:
    """A job's phases from its samples and events (``on_sample``, ``on_event``)."""

    def __init__(self, max_spans: int = MAX_SPANS) -> None:
        self.spans: deque[Span] = deque(maxlen=max_spans)  # ended, in the order told
        self.open: dict[str, float] = {}  # the phases under way: phase -> since
        self.training_s = 0.0  # the samples' training seconds
        self.timed = False  # a sample carried its training seconds: a job's
        self.first_step_s: float | None = None
        self.last_step_s: float | None = None  # the latest sample with a step in it
        self._steps = 0
        self.ended_s: float | None = None  # the run ended (stopped or crashed) at
        self.last_end_s = 0.0  # the latest end of a span: training since then, when none is open
        self.goodput: Event | None = None  # the job's own account, at its end
        self.stall: Event | None = None  # the latest report of where a stalled job waits
        self.resumed: Event | None = None  # that stall's end, once steps came again

    @property
    def active(self) -> bool:
        """The run has phases to show (a job's); a family's run has none."""
        return self.timed or bool(self.spans or self.open or self.goodput)

    def on_sample(self, s: Sample) -> None:
        if s.steps > self._steps:
            self._steps, self.last_step_s = s.steps, s.time_s
        if s.train_s is None:
            return
        self.timed = True
        self.training_s += s.train_s
        if self.first_step_s is None:
            self.first_step_s = max(0.0, s.time_s - s.interval_s)

    def on_event(self, e: Event) -> None:
        if e.kind == EventKind.PHASE and e.what:
            self._on_phase(e)
        elif e.kind == EventKind.STALLED:
            self.stall, self.resumed = e, None
        elif e.kind == EventKind.MEASURED and e.what == GOODPUT:
            self.goodput = e
        elif e.kind in ENDING_KINDS:
            self.ended_s = e.time_s

    def _on_phase(self, e: Event) -> None:
        span = span_of(e)
        if span is None:
            return
        if span.seconds is None:
            since = e.time_s
            if e.what == STALLED_PHASE and self.last_step_s is not None:  # told once it has lasted: from the last step
                since = min(since, self.last_step_s)
            self.open.setdefault(e.what, since)
            return
        seconds = span.seconds
        self.open.pop(e.what, None)
        if e.what == STARTUP:  # told once the run has started: from the launch to the first step
            self.first_step_s = seconds
        if e.what == STALLED_PHASE and self.stall is not None:
            self.resumed = e
        if seconds <= 0:  # it was none after all
            return
        start = 0.0 if e.what == STARTUP else max(0.0, e.time_s - seconds)
        end = start + seconds if e.what == STARTUP else e.time_s
        self.spans.append(Span(start, end, e.what))
        self.last_end_s = max(self.last_end_s, end)

    # -- read ---------------------------------------------------------------------------------------
    def current(self) -> tuple[str, float] | None:
        """The phase now and since when: a stall first, then the latest begun, else training
        (after the first step); None before it or once the run has ended."""
        if self.ended_s is not None:
            return None
        if STALLED_PHASE in self.open:
            return STALLED_PHASE, self.open[STALLED_PHASE]
        if self.open:
            phase = max(self.open, key=lambda p: self.open[p])
            return phase, self.open[phase]
        if self.first_step_s is None:
            return None
        return TRAINING, max(self.first_step_s, self.last_end_s)

    def goodput_pct(self, now_s: float) -> float | None:
        """Training's share of the wall time up to ``now_s``; the job's own figure once it has
        ended; None for a run without training seconds."""
        account = self.goodput.data if self.goodput is not None else None
        if isinstance(account, Goodput) and account.pct is not None:  # (a recording keeps it whole)
            return account.pct
        if not self.timed or now_s <= 0:
            return None
        theirs = sum((s.end_s or now_s) - s.start_s for s in self.spans_until(now_s) if s.phase in NOT_THE_JOBS)
        wall = now_s - min(max(0.0, theirs), now_s)
        return 100.0 * min(self.training_s, wall) / wall if wall > 0 else None

    def spans_until(self, end_s: float) -> list[Span]:
        """Every span, those under way ending at ``end_s``."""
        return [*self.spans, *(Span(since, end_s, p) for p, since in self.open.items())]

    def buckets(self, t0: float, t1: float, n: int, now_s: float) -> list[str | None]:
        """The phase that took most of each of ``n`` buckets centred on ``t0 … t1`` (a chart's
        columns: the first on ``t0``, the last on ``t1``); None where nothing is known (before the
        first step, after the run). Spans under way and training end at ``now_s`` (or the run's end)."""
        if n <= 0:
            return []
        width = (t1 - t0) / max(1, n - 1) or 1.0
        lo, hi = t0 - width / 2, t1 + width / 2
        grid = _Buckets(lo, width, n)
        end = self.ended_s if self.ended_s is not None else now_s
        for span in self.spans_until(end):
            if span.start_s < hi and span.end_s is not None and span.end_s > lo:  # in the window
                grid.add(span.start_s, span.end_s, span.phase)
        if self.first_step_s is not None:
            grid.add(self.first_step_s, end, TRAINING)
        return grid.most()


class _Buckets:
    """Seconds of each phase in ``n`` buckets of ``width`` from ``lo``."""

    def __init__(self, lo: float, width: float, n: int) -> None:
        self.lo, self.width, self.n = lo, width, n
        self.seconds: list[dict[str, float]] = [{} for _ in range(n)]

    def add(self, a: float, b: float, phase: str) -> None:
        lo, width = self.lo, self.width
        a, b = max(a, lo), min(b, lo + self.n * width)
        if b <= a:
            return
        for i in range(int((a - lo) // width), min(self.n - 1, int((b - lo) // width)) + 1):
            left = lo + i * width
            w = min(b, left + width) - max(a, left)
            if w > 0:
                got = self.seconds[i]
                got[phase] = got.get(phase, 0.0) + w

    def most(self) -> list[str | None]:
        """Each bucket's phase of the most seconds; training's are what the other spans leave of its
        stretch (startup is before it)."""
        out = []
        for got in self.seconds:
            if TRAINING in got:
                got[TRAINING] -= sum(v for p, v in got.items() if p not in (TRAINING, STARTUP))
            out.append(_most(got))
        return out


def _most(weights: dict[str, float]) -> str | None:
    best = max(weights, key=lambda p: weights[p], default=None)
    return best if best is not None and weights[best] > 0 else None
