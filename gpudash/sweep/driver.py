"""The session driver of ``gpudash sweep`` and ``gpudash tune``: one ``EngineSession`` started,
switched between configurations and measured, whatever decides the order (a sweep's rounds,
``gpudash.sweep.rounds``; tune's race, ``gpudash.tune.run``).

Never imports torch (the workload runs in the child), textual or matplotlib. A switch sends
``SetVariant``/``SetBatchSize``/``SetKnobs`` (``switch_controls``) and waits for the matching
``changed`` (or ``error``) events. Samples of the warm-up seconds after each change (and after the
start) are left out; then the configuration's samples are kept until they span the plan's seconds.
A switch to what already runs sends no control (the engine would ignore it): the warm-up clock
just starts again — the A/A case. A configuration that fails (an ``error`` event) is recorded with
its message and left out afterwards.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from gpudash.core.protocol import (
    Control,
    Event,
    EventKind,
    ExitCode,
    GpuSample,
    RunConfig,
    Sample,
    SetBatchSize,
    SetKnobs,
    SetVariant,
    TimeStages,
    TraceWindow,
)
from gpudash.core.runstate import RunState
from gpudash.core.stage_times import StageTimes
from gpudash.recording.interrupt import Interrupted
from gpudash.stats.fmt import fmt_pm
from gpudash.sweep.plan import Configuration, FamilyPlan, SweepSettings
from gpudash.sweep.progress import SweepProgress
from gpudash.sweep.results import RepeatResult
from gpudash.sweep.timing import TimeLedger, start_warm_up_s
from gpudash.sweep.window import Clock, Window

if TYPE_CHECKING:  # pragma: no cover
    from gpudash.host.session import EngineSession

POLL_S = 0.05  # how often the session is polled
START_TIMEOUT_S = 600.0  # the child imports torch and builds the workload
CHANGE_TIMEOUT_S = 300.0  # a change rebuilds the workload (DataLoader workers, allocations); a
# knob's warm-up (compile, capture) may take longer: each of its progress events restarts this clock
STAGES_TIMEOUT_S = 120.0  # each stage alone, STAGE_STEPS times
STAGE_STEPS = 20
STALL_S = 120.0  # no window filled this long after it should have: the configuration failed
RECONFIGURING = frozenset({"variant", "batch_size", "knobs", "workload"})  # errors that end a configuration


class ConfigFailed(Exception):
    """The configuration cannot be measured (the engine refused it, or it never produced samples)."""


class SweepStopped(Exception):
    """The sweep ends early: ``status`` says why, ``code`` is the exit status."""

    def __init__(self, status: str, code: ExitCode) -> None:
        super().__init__(status)
        self.status, self.code = status, code


class Recorder(Protocol):
    """Where a family's measuring goes (a sweep's or a tune run's report)."""

    time: TimeLedger  # where the wall clock went

    def add_result(self, result: RepeatResult) -> None: ...  # a measurement finished

    def note_session(self, session: EngineSession) -> None: ...  # the workload started


class SessionDriver:
    """One family's configurations measured on one ``EngineSession``; each finished result goes to
    ``recorder``. What to measure next is the subclass's (``FamilyRun``'s rounds, ``TuneRun``'s race)."""

    def __init__(
        self,
        plan: FamilyPlan,
        settings: SweepSettings,
        *,
        session_for: Callable[[RunConfig], EngineSession],
        interrupted: Interrupted,
        progress: SweepProgress,
        clock: Clock,
        recorder: Recorder,
    ) -> None:
        self.plan, self.settings = plan, settings
        self.session_for, self.interrupted, self.progress, self.clock = session_for, interrupted, progress, clock
        self.recorder, self.ledger = recorder, recorder.time
        self.session: EngineSession | None = None
        self.results: list[RepeatResult] = []
        self.failed: set[Configuration] = set()
        self.notes: list[str] = []  # lines for the report (a sweep's: how --until-ci ended)
        self.run_state = RunState()  # what the engine reports it runs
        self.window: Window | None = None

    def measure_once(self, config: Configuration, repeat: int) -> None:
        """Switch to ``config``, measure it once; a refusal is recorded and the config dropped."""
        self.progress.start_unit(config.name, repeat, self.settings.repeats)
        try:
            since = self.switch(config)
            result = self._measure(config, repeat, since)
            if self.plan.two_stage:
                result = dataclasses.replace(result, stages=self._time_stages(config))
            if self.settings.trace_steps:
                self._trace(config)
        except ConfigFailed as exc:
            self.failed.add(config)
            result = RepeatResult(config, repeat, error=str(exc))
        self.results.append(result)
        self.recorder.add_result(result)
        self.progress.finish_unit(self.describe(result))

    def describe(self, result: RepeatResult) -> str:
        """One line for stderr: what a configuration × repeat measured, or why it failed."""
        name = f"{result.config.name} repeat {result.repeat}"
        if result.error:
            return f"{name}: failed: {result.error}"
        e = result.estimates()["steps_per_s"]
        if e is None:
            return f"{name}: no samples"
        return f"{name}: {fmt_pm(e)} steps/s ({result.seconds:.1f} s, {result.n_samples} samples)"

    # -- the session --------------------------------------------------------------------------------
    def _now(self) -> float:
        """Seconds since the session began: the clock of every message."""
        assert self.session is not None
        return time.monotonic() - self.session.t0

    def _pump(self) -> list[Event]:
        """Poll once: samples into the open window; events returned (a signal or its end: ``SweepStopped``)."""
        outcome = self.interrupted.outcome()
        if outcome is not None:
            raise SweepStopped(*outcome)
        assert self.session is not None
        events: list[Event] = []
        for msg in self.session.poll():
            if isinstance(msg, Event):
                self._on_event(msg)
                events.append(msg)
            elif self.window is not None and isinstance(msg, (Sample, GpuSample)):
                self.window.offer(msg)
        return events

    def _on_event(self, e: Event) -> None:
        """Track what runs; note the start; the workload's end stops the sweep."""
        self.run_state.observe(e)
        if e.kind == EventKind.STARTED:
            assert self.session is not None
            self.recorder.note_session(self.session)
        elif e.kind in (EventKind.CRASHED, EventKind.STOPPED):
            assert self.session is not None
            why = e.message or "it stopped by itself"
            log = self.session.log_path
            raise SweepStopped(f"workload failed: {why}" + ("" if log in why else f" (log: {log})"), ExitCode.FAILED)

    def _wait(
        self, done: Callable[[list[Event]], bool], timeout: float, what: str, *, warming: str | None = None
    ) -> None:
        """Poll until ``done(events)``; ``ConfigFailed`` after ``timeout`` seconds. ``warming``
        (a configuration's name): its knobs' warm-up (compile, capture) reports progress every
        2 s; each report is shown and restarts the clock."""
        deadline = time.monotonic() + timeout
        while not done(events := self._pump()):
            reports = [e for e in events if e.kind == EventKind.PROGRESS]
            if warming is not None and reports:
                deadline = time.monotonic() + timeout
                self.progress.status(f"{warming} · {reports[-1].message}")
            if time.monotonic() > deadline:
                raise ConfigFailed(f"no {what} within {timeout:.0f} s")
            time.sleep(POLL_S)

    def start(self) -> None:
        """Start the session and wait for the workload's first configuration."""
        assert self.session is not None
        self.progress.status(f"starting {self.plan.family} (the workload process imports torch)")
        t, seen = time.monotonic(), []

        def started(events: list[Event]) -> bool:
            seen.extend(events)
            return any(e.kind == EventKind.STARTED for e in events)

        try:
            self.session.start()
            self._wait(started, START_TIMEOUT_S, f"start of {self.plan.family}")
        except ConfigFailed as exc:
            raise SweepStopped(f"workload failed: {exc}", ExitCode.FAILED) from None
        finally:
            self.ledger.split(time.monotonic() - t, "starting", start_warm_up_s(seen))

    def switch(self, config: Configuration) -> float:
        """Make ``config`` run; when (session time) it began. A no-op switch (A/A) sends nothing."""
        now = self.run_state.running
        assert self.session is not None and now is not None
        controls = switch_controls(
            (now.variant, now.batch_size, now.knobs), (config.variant, config.batch_size, config.knobs)
        )
        t, sent = time.monotonic(), self._now()
        for control in controls:
            self.session.send(control)
        pending = [_what(c) for c in controls]  # the engine answers each in turn
        began, errors, seen = sent, [], []

        def answered(events: list[Event]) -> bool:
            nonlocal began
            seen.extend(events)
            for e in events:
                if e.what in pending and e.kind in (EventKind.CHANGED, EventKind.ERROR):
                    pending.remove(e.what)
                    if e.kind == EventKind.ERROR:
                        errors.append(e.message or f"{e.what} {e.after} refused")
                    began = max(began, e.time_s)
            return not pending

        try:
            if pending:
                self._wait(answered, CHANGE_TIMEOUT_S, f"reply to the change to {config.name}", warming=config.name)
        finally:
            self.ledger.switched(time.monotonic() - t, sent, seen, config)
        if errors:
            raise ConfigFailed("; ".join(dict.fromkeys(errors)))
        return began

    def _measure(self, config: Configuration, repeat: int, since: float) -> RepeatResult:
        """Keep ``config``'s samples from ``--warmup`` s after ``since`` until they span ``--seconds``."""
        s = self.plan
        window = self.window = Window(config, since + s.warmup, s.seconds)
        t, began = time.monotonic(), self._now()
        deadline = t + s.warmup + s.seconds + STALL_S
        try:
            while not window.full:
                for e in self._pump():
                    if e.kind == EventKind.ERROR and e.what in RECONFIGURING:
                        raise ConfigFailed(e.message or f"{e.what} failed")
                self.progress.update(min(1.0, (self._now() - since) / (s.warmup + s.seconds)))
                if time.monotonic() > deadline:
                    raise ConfigFailed(f"no throughput samples for {STALL_S:.0f} s after warm-up")
                time.sleep(POLL_S)
        finally:
            self.window = None
            self.ledger.measured(time.monotonic() - t, began, window.start_s)
        return window.result(repeat)

    def answer(self, control: Control, what: str, timeout: float, waiting_for: str, part: str) -> Event:
        """Send ``control``; its "measured" (or "error") event of ``what``; the seconds go to ``part``."""
        assert self.session is not None
        answer: list[Event] = []

        def answered(events: list[Event]) -> bool:
            answer.extend(e for e in events if e.what == what and e.kind in (EventKind.MEASURED, EventKind.ERROR))
            return bool(answer)

        with self.ledger.timed(part):
            self.session.send(control)
            self._wait(answered, timeout, waiting_for)
        return answer[0]

    def _time_stages(self, config: Configuration) -> StageTimes | None:
        """Time the two stages alone, after the window (None: this variant has no such split)."""
        self.progress.status(f"{config.name} · timing each stage alone")
        answer = self.answer(
            TimeStages(STAGE_STEPS), "stages", STAGES_TIMEOUT_S, f"stage times of {config.name}", "timing_stages"
        )
        return answer.data if isinstance(answer.data, StageTimes) else None

    def _trace(self, config: Configuration) -> None:
        """A profiler window after the measurement (in no window): the trace to ``OUT/traces``; a failure said."""
        assert self.settings.trace_steps
        self.progress.status(f"{config.name} · profiling {self.settings.trace_steps} steps")
        control = TraceWindow(self.settings.trace_steps)
        answer = self.answer(control, "trace", STAGES_TIMEOUT_S, f"profiler window of {config.name}", "profiling")
        self.progress.status(f"{config.name} · {answer.message}")

    def stop(self) -> None:
        """Stop the session (at once after a second Ctrl-C)."""
        if self.session is None:
            return
        try:
            with self.ledger.timed("stopping"):
                self.session.stop(timeout=self.interrupted.stop_timeout)
        except KeyboardInterrupt:
            self.session.stop(timeout=0)
            raise


Setting = tuple[str, int, str]  # (variant, batch size, knobs text)


def switch_controls(now: Setting, want: Setting) -> list[Control]:
    """The controls that take the engine from ``now`` to ``want``, each valid where it is sent:
    knobs that go are turned off before the variant or batch size changes, knobs that come are
    turned on after it (a variant refuses some knobs: cuda_graph needs a sync-free step), so a
    knob's slow warm-up (compile, capture) happens once, in the new configuration. Empty:
    ``want`` already runs."""
    from workloads.knobs import Knobs, parse_knobs

    (variant, batch, knobs), (new_variant, new_batch, new_knobs) = now, want
    middle = knobs  # what runs while the variant and batch size change
    if knobs != new_knobs and (variant, batch) != (new_variant, new_batch):
        old, new = parse_knobs(knobs), parse_knobs(new_knobs)
        middle = Knobs((n, v) for n, v in old.items() if new.get(n) == v).text()
    controls: list[Control] = [SetKnobs(middle)] if middle != knobs else []
    if variant != new_variant:
        controls.append(SetVariant(new_variant))
    if batch != new_batch:
        controls.append(SetBatchSize(new_batch))
    if new_knobs != middle:
        controls.append(SetKnobs(new_knobs))
    return controls


def _what(control: Control) -> str:
    """The ``what`` of the events that answer ``control``."""
    return {SetKnobs: "knobs", SetVariant: "variant", SetBatchSize: "batch_size"}[type(control)]
