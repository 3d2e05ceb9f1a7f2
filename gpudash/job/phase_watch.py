"""A job's phases as the session sees them: the spans its hooks time (evaluation, checkpoints,
compiling), its start-up and teardown, stalls (no step for long, and its processes neither moving
nor computing: ``gpudash.job.stall_probe``; ``gpudash.job.stalls``, where each thread waits asked of
each process), each as ``phase`` events, and at its end its wall time by
phase with goodput (a "measured" event, ``GOODPUT``). Torch-free.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from gpudash.boot.gpudash_boot import wire
from gpudash.core.goodput import Goodput, PhaseSpan, StallReport
from gpudash.core.lenient import float_or, int_or
from gpudash.core.protocol import (
    COMPILE,
    GOODPUT,
    OTHER,
    PROFILING,
    STALLED_PHASE,
    STARTUP,
    SUSPENDED,
    TEARDOWN,
    TRAINING,
    EventKind,
)
from gpudash.job.channel import HostChannel
from gpudash.job.stall_probe import GAP_S, look_at_cpus, working
from gpudash.job.stalls import AGAIN_S, STALL_MIN_S, Stall, report, stall_after_s
from gpudash.job.step_record import StepRecord
from gpudash.job.steps import JobSamples
from gpudash.job.wall_time import SPAN_KINDS, JobPhases

Targets = Callable[[], list[tuple[int, str, str]]]  # each rank's (pid, "rank N", its socket)
MAX_SECONDS = 1e12  # a time or a span a job's message says, at the most (a larger one is none)
BETWEEN = " between steps, no training seen in it"  # what an ``other`` span's message adds
OURS = ": gpudash's profiler window, started or stopped and its trace written between steps (not the job's time)"


class PhaseWatch:
    """The lead rank's phases, from the hooks' messages and its steps; ``emit`` makes an event."""

    def __init__(self, t0: float, samples: JobSamples, channel: HostChannel, emit: Callable[..., object]) -> None:
        self.t0 = t0
        self.samples = samples
        self.channel = channel
        self.emit = emit
        self.phases = JobPhases(t0)  # the lead rank's wall time by phase, and goodput
        self.stall_min_s = STALL_MIN_S  # no step for at least this long (and 10 median steps): stalled
        self.stall: Stall | None = None
        self.looks: list[Stall] = []  # the looks at a job with no step for long, before it is called stalled
        self.look_again_at = 0.0  # a long step that computes: when to look again (monotonic)
        self.workers: dict[int, str] = {}  # a DataLoader worker's pid -> its socket (for its stacks)
        self.suspended_s = 0.0  # seconds the job was stopped since its last step: not the next step's

    def on_message(self, kind: str, m: dict[str, Any], lead: bool) -> None:
        """A "phase" (the lead rank's), "stacks" or "worker" message of the job's hooks."""
        if kind == wire.PHASE and lead:
            self._on_phase(m)
        elif kind == wire.STACKS and (asking := self.stall or (self.looks[-1] if self.looks else None)) is not None:
            asking.answers[int_or(m.get("pid"))] = m
        elif kind == wire.WORKER:
            self.workers[int_or(m.get("pid"))] = str(m.get("ctl") or "")

    def step(self, record: StepRecord) -> StepRecord:
        """A step of the lead rank; the first after a stall ends it (its seconds were the stall's)."""
        self.looks, self.look_again_at = [], 0.0
        stall = self.stall
        if stall is not None and record.t > stall.since:
            self.stall = None
            seconds = max(0.0, record.t - stall.since)
            self.phases.open.pop(STALLED_PHASE, None)
            self.phases.end(STALLED_PHASE, seconds)
            self._event(STALLED_PHASE, seconds, f"steps resumed after a {seconds:.0f} s stall")
            record = replace(record, train_s=None)
        if self.suspended_s and record.train_s is not None:  # the step the job was stopped in
            left = record.train_s - self.suspended_s
            record = replace(record, train_s=left if left > 0 else None)
        self.suspended_s = 0.0
        self.phases.step(record.t, record.train_s)
        return record

    def suspended(self, now: float, message: str) -> None:
        """The job stopped (``gpudash.job.suspended``): its time is not training, nor a stall."""
        self.phases.begin(SUSPENDED, now)
        self._event(SUSPENDED, None, message)

    def resumed(self, now: float, since: float) -> None:
        """The job goes on after ``now - since`` seconds stopped."""
        seconds = max(0.0, now - since)
        self.phases.end(SUSPENDED, seconds)
        self.suspended_s += seconds
        self._event(SUSPENDED, seconds, f"the job goes on after {seconds:.1f} s stopped")

    def started(self, compiled_s: float = 0.0) -> None:
        """The run has started: its start-up, launch to the first step, less the compiles before the
        first step's end (``compiled_s``, dynamo's own seconds: the compile phase's)."""
        first, inside = self.phases.first_step_t, self.phases.first_training_s
        if first is not None:
            compiled_s = min(compiled_s, max(0.0, first - self.t0 - inside))
            if compiled_s > 0:
                self.phases.first_compile_s = compiled_s
                self.phases.end(COMPILE, compiled_s)
                self._event(COMPILE, compiled_s, f"compile {compiled_s:.2f} s before the first step's end")
            seconds = max(0.0, first - self.t0 - inside - compiled_s)
            also = f", less its {inside:.2f} s in optimizer.step(): training" if inside else ""
            also += f", less {compiled_s:.2f} s compiling" if compiled_s > 0 else ""
            self._event(STARTUP, seconds, f"startup {seconds:.2f} s (launch to the first step{also})")

    def ended(self, now: float) -> None:
        """At the job's end: its teardown (unless it ended in a stall or a span), and its wall time
        by phase with goodput."""
        phases = self.phases
        ended_in = list(phases.open)
        for kind in ended_in:
            seconds = max(0.0, now - phases.open[kind])
            phases.end(kind, seconds)
            self._event(kind, seconds, f"{kind} {seconds:.2f} s, until the job ended")
        self.stall = None
        phases.ended_t, phases.ended_in_phase = now, bool(ended_in)
        teardown = phases.totals(now)[TEARDOWN]
        if phases.last_step_t is not None and not ended_in:
            after = "the last step" if phases.after_last_t is None else f"the {phases.after_last} after the last step"
            self._event(TEARDOWN, teardown, f"teardown {teardown:.2f} s ({after} to the exit)")
        account = Goodput(phases.totals(now), phases.wall_s(now), phases.goodput_pct(now))
        self.emit(EventKind.MEASURED, what=GOODPUT, message=phases.line(now), data=account)

    # -- spans ---------------------------------------------------------------------------------------
    def _on_phase(self, m: dict[str, Any]) -> None:
        """A span the hooks timed between steps: begun (said while it lasts), ended with its seconds
        (``quiet``: a short one, counted and not said), or (``cancel``) part of a step after all.
        One that ends while the job is stalled (told at the step that ends the stall) is the
        stall's: its seconds are not counted twice."""
        what = str(m.get("kind", ""))
        if what == TRAINING and not m.get("open"):  # the first step's time inside optimizer.step()
            self.phases.first_step_training(max(0.0, float_or(m.get("s"), 0.0, within=MAX_SECONDS)))
            return
        if what not in SPAN_KINDS:
            return
        if m.get("open"):
            self.phases.begin(what, float_or(m.get("t0"), time.monotonic(), within=MAX_SECONDS))
            self._event(what, None, f"{what} under way")
            return
        stalled = self.stall is not None
        seconds = 0.0 if m.get("cancel") or stalled else max(0.0, float_or(m.get("s"), 0.0, within=MAX_SECONDS))
        was_open = what in self.phases.open
        self.phases.end(what, seconds, float_or(m.get("t1"), 0.0, within=MAX_SECONDS) or None)
        if m.get("quiet") and not was_open:  # a short span (it may come every few steps): counted, not said
            self.samples.away = bool(self.phases.open)
            return
        if seconds > 0:
            self._event(what, seconds, f"{what} {_took(seconds)}" + {OTHER: BETWEEN, PROFILING: OURS}.get(what, ""))
        elif was_open:
            why = "the stall's" if stalled else "none ran before the exit" if m.get("final") else "part of a step"
            self._event(what, 0.0, f"{what}: {why}" if stalled else f"not {what} after all: {why}")

    def _event(self, what: str, seconds: float | None, message: str) -> None:
        self.samples.away = bool(self.phases.open)
        after = "" if seconds is None else f"{seconds:.3f}"
        span = PhaseSpan(None if seconds is None else round(seconds, 3))
        self.emit(EventKind.PHASE, what=what, after=after, message=message, data=span)

    # -- stalls --------------------------------------------------------------------------------------
    def check_stall(self, now: float, targets: Targets) -> None:
        """No step for long (never before a median step is known), in no span the hooks time: each
        process looked at twice; where none moved or computed, stalled: where each waits is told
        once they answered (or the time is up), and again every ``AGAIN_S``. Where one did, it is a
        long step: nothing is said, and it is looked at again ``AGAIN_S`` later."""
        last, median = self.samples.last_step_t, self.samples.median_step_s
        stall = self.stall
        if stall is not None:
            if stall.told_at is None and stall.complete(now):
                self._tell(stall, now)
            elif stall.told_at is not None and now - stall.told_at >= AGAIN_S:
                self._ask(stall, now, targets)
            return
        if last is None or median is None or self.phases.open or now - last < stall_after_s(median, self.stall_min_s):
            self.looks = []
            return
        looks = self.looks
        if now < self.look_again_at or (looks and not looks[-1].complete(now)):
            return
        if len(looks) < 2:
            if not looks or now - looks[0].asked_at >= GAP_S:
                looks.append(Stall(since=last, asked_at=now))
                self._ask(looks[-1], now, targets)
            return
        self.looks = []
        if working(*looks) is not None:
            self.look_again_at = now + AGAIN_S  # a long step: looked at again later, quietly
            self.samples.working_after = last  # the step under way: its rate goes on falling, not 0
            return
        self.stall = stall = looks[1]
        self.phases.begin(STALLED_PHASE, last)
        self._event(STALLED_PHASE, None, f"stalled: no step for {now - last:.0f} s")
        if stall.complete(now):
            self._tell(stall, now)

    def _ask(self, stall: Stall, now: float, targets: Targets) -> None:
        """Each process of the job (its ranks, then their DataLoader workers) asked for its stacks."""
        stall.asked_at, stall.told_at = now, None
        stall.answers.clear()
        stall.asked.clear()
        ranks = {r: w.last_t for r, w in self.samples.ranks.items() if w.last_t is not None}
        stall.first_rank = min(ranks, key=lambda r: ranks[r]) if ranks else 0
        workers = [(pid, "DataLoader worker", ctl) for pid, ctl in sorted(self.workers.items())]
        for pid, who, ctl in [*targets(), *workers]:
            if ctl and self.channel.request(ctl, {"k": wire.STACKS}):
                stall.asked[pid] = who
            elif not who.startswith("DataLoader"):
                stall.asked[pid] = who  # said as not answering
            else:
                self.workers.pop(pid, None)  # a worker that has gone
        look_at_cpus(stall)

    def _tell(self, stall: Stall, now: float) -> None:
        stall.told_at = now
        line, lines = report(stall, now, self.samples.median_step_s)
        report_ = StallReport(round(now - stall.since, 3), tuple(lines))
        self.emit(EventKind.STALLED, what=STALLED_PHASE, message=line, data=report_)


def _took(seconds: float) -> str:
    """ "2.64 s"; "3.1 ms" for a span under 10 ms (a quick save after the last step)."""
    return f"{seconds:.2f} s" if seconds >= 0.01 else f"{seconds * 1e3:.1f} ms"
