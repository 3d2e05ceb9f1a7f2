"""A job's phases as the session sees them: the spans its hooks time (evaluation, checkpoints,
compiling), its start-up and teardown, stalls (no step for long: ``gpudash.job.stalls``, where each
thread waits asked of each process), each as ``phase`` events, and at its end its wall time by
phase with goodput (a "measured" event, ``GOODPUT``). Torch-free.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from gpudash.core.protocol import GOODPUT, OTHER, STALLED_PHASE, STARTUP, SUSPENDED, TEARDOWN, EventKind
from gpudash.job.boot import gpudash_job_wire as wire
from gpudash.job.channel import HostChannel
from gpudash.job.phases import SPAN_KINDS, JobPhases
from gpudash.job.stalls import AGAIN_S, STALL_MIN_S, Stall, report, stall_after_s
from gpudash.job.steps import JobSamples, StepRecord

Targets = Callable[[], list[tuple[int, str, str]]]  # each rank's (pid, "rank N", its socket)
BETWEEN = " between steps, no training seen in it"  # what an ``other`` span's message adds


class PhaseWatch:
    """The lead rank's phases, from the hooks' messages and its steps; ``emit`` makes an event."""

    def __init__(self, t0: float, samples: JobSamples, channel: HostChannel, emit: Callable[..., None]) -> None:
        self.t0 = t0
        self.samples = samples
        self.channel = channel
        self.emit = emit
        self.phases = JobPhases(t0)  # the lead rank's wall time by phase, and goodput
        self.stall_min_s = STALL_MIN_S  # no step for at least this long (and 10 median steps): stalled
        self.stall: Stall | None = None
        self.workers: dict[int, str] = {}  # a DataLoader worker's pid -> its socket (for its stacks)
        self.suspended_s = 0.0  # seconds the job was stopped since its last step: not the next step's

    def on_message(self, kind: str, m: dict[str, Any], lead: bool) -> None:
        """A "phase" (the lead rank's), "stacks" or "worker" message of the job's hooks."""
        if kind == wire.PHASE and lead:
            self._on_phase(m)
        elif kind == wire.STACKS and self.stall is not None:
            self.stall.answers[_int(m.get("pid"))] = m
        elif kind == wire.WORKER:
            self.workers[_int(m.get("pid"))] = str(m.get("ctl") or "")

    def step(self, record: StepRecord) -> StepRecord:
        """A step of the lead rank; the first after a stall ends it (its seconds were the stall's)."""
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
        """The job stopped (``gpudash.job.stops``): its time is not training, nor a stall."""
        self.phases.begin(SUSPENDED, now)
        self._event(SUSPENDED, None, message)

    def resumed(self, now: float, since: float) -> None:
        """The job goes on after ``now - since`` seconds stopped."""
        seconds = max(0.0, now - since)
        self.phases.end(SUSPENDED, seconds)
        self.suspended_s += seconds
        self._event(SUSPENDED, seconds, f"the job goes on after {seconds:.1f} s stopped")

    def started(self) -> None:
        """The run has started: its start-up, launch to the first step."""
        first = self.phases.first_step_t
        if first is not None:
            self._event(STARTUP, first - self.t0, f"startup {first - self.t0:.2f} s (launch to the first step)")

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
            self._event(TEARDOWN, teardown, f"teardown {teardown:.2f} s (the last step to the exit)")
        details = {f"{k}_s": f"{v:.3f}" for k, v in phases.totals(now).items()}
        details["wall_s"] = f"{phases.wall_s(now):.3f}"
        pct = phases.goodput_pct(now)
        details["goodput_pct"] = "" if pct is None else f"{pct:.2f}"
        self.emit(EventKind.MEASURED, what=GOODPUT, message=phases.line(now), details=details)

    # -- spans ---------------------------------------------------------------------------------------
    def _on_phase(self, m: dict[str, Any]) -> None:
        """A span the hooks timed between steps: begun (said while it lasts), ended with its
        seconds, or (``cancel``) part of a step after all. One that ends while the job is stalled
        (told at the step that ends the stall) is the stall's: its seconds are not counted twice."""
        what = str(m.get("kind", ""))
        if what not in SPAN_KINDS:
            return
        if m.get("open"):
            self.phases.begin(what, _float(m.get("t0"), time.monotonic()))
            self._event(what, None, f"{what} under way")
            return
        stalled = self.stall is not None
        seconds = 0.0 if m.get("cancel") or stalled else max(0.0, _float(m.get("s"), 0.0))
        was_open = what in self.phases.open
        self.phases.end(what, seconds, _float(m.get("t1"), 0.0) or None)
        if seconds > 0:
            self._event(what, seconds, f"{what} {seconds:.2f} s" + (BETWEEN if what == OTHER else ""))
        elif was_open:
            self._event(what, 0.0, f"{what}: the stall's" if stalled else f"not {what} after all: part of a step")

    def _event(self, what: str, seconds: float | None, message: str) -> None:
        self.samples.away = bool(self.phases.open)
        after = "" if seconds is None else f"{seconds:.3f}"
        self.emit(EventKind.PHASE, what=what, after=after, message=message)

    # -- stalls --------------------------------------------------------------------------------------
    def check_stall(self, now: float, targets: Targets) -> None:
        """No step for long, in no span the hooks time: stalled; ask each process where it waits,
        tell it once they answered (or the time is up), and again every ``AGAIN_S``."""
        last = self.samples.last_step_t
        if last is None:
            return
        stall = self.stall
        if stall is None:
            if self.phases.open or now - last < stall_after_s(self.samples.median_step_s, self.stall_min_s):
                return
            self.stall = stall = Stall(since=last, asked_at=now)
            self.phases.begin(STALLED_PHASE, last)
            self._event(STALLED_PHASE, None, f"stalled: no step for {now - last:.0f} s")
            self._ask(stall, now, targets)
        elif stall.told_at is None and stall.complete(now):
            self._tell(stall, now)
        elif stall.told_at is not None and now - stall.told_at >= AGAIN_S:
            self._ask(stall, now, targets)

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

    def _tell(self, stall: Stall, now: float) -> None:
        stall.told_at = now
        line, lines = report(stall, now, self.samples.median_step_s)
        details = {"stalled_s": f"{now - stall.since:.3f}", "where": "\n".join(lines)}
        self.emit(EventKind.STALLED, what=STALLED_PHASE, message=line, details=details)


def _float(value: Any, default: float) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return default
    return number if number == number and abs(number) < 1e12 else default


def _int(value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0
