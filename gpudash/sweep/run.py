"""``gpudash sweep``: measure configurations in interleaved, shuffled rounds on one session per family.

Never imports torch (the workload runs in the child), textual or matplotlib (the plot is
``gpudash.sweep.report``'s, imported when written). The plan and the arguments are
``gpudash.sweep.plan``'s; the figures ``gpudash.sweep.results``'; the files ``gpudash.sweep.report``'s.

How one family is measured: its ``EngineSession`` starts in the first configuration of the
first round (with its knobs); each round visits every configuration once in a seeded shuffled
order, switching with ``SetVariant``/``SetBatchSize``/``SetKnobs`` (``switch_controls``) and
waiting for the matching ``changed`` (or ``error``) events. Samples of the ``--warmup`` seconds
after each change (and after the start) are left out; then the configuration's samples are kept
until they span ``--seconds``. A switch to what already runs sends no control (the engine would
ignore it): the warm-up clock just starts again — the A/A case. A configuration that fails (an
``error`` event) is recorded with its message and left out of later rounds.

Exit status: 0 done, 1 the workload crashed (or nothing could be measured), 130 SIGINT or
SIGTERM. In every case the files hold every finished configuration × repeat.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import time
from collections.abc import Callable, Iterator
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
from gpudash.diagnosis.telemetry import RecentTicks
from gpudash.recording.headless import _Interrupted
from gpudash.stats.fmt import fmt_pm
from gpudash.sweep.command import parse_plan
from gpudash.sweep.plan import (
    Configuration,
    FamilyPlan,
    SweepPlan,
    SweepSettings,
    build_parser,
    plan_from_args,
    round_orders,
    run_config,
)
from gpudash.sweep.progress import SweepProgress
from gpudash.sweep.results import RepeatResult, StageTimes, summarize, wide_intervals
from gpudash.sweep.timing import TimeLedger, start_warm_up_s
from gpudash.sweep.window import Clock, Window

if TYPE_CHECKING:  # pragma: no cover
    from gpudash.host.session import EngineSession
    from gpudash.sweep.report import SweepReport

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


class FamilyRun:
    """One family's rounds on one ``EngineSession``; each finished result goes to ``recorder``."""

    def __init__(
        self,
        plan: FamilyPlan,
        settings: SweepSettings,
        *,
        session_for: Callable[[RunConfig], EngineSession],
        interrupted: _Interrupted,
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
        self.notes: list[str] = []  # how --until-ci ended, for the report
        self.run_state = RunState()  # what the engine reports it runs
        self.window: Window | None = None
        self.recent_gpu = RecentTicks()  # a diagnosis is judged with the tick from before its window

    # -- the rounds ---------------------------------------------------------------------------------
    def run(self) -> None:
        """Start the session in the first round's first configuration, measure every round, stop."""
        rounds = self._rounds()
        first = next(rounds)
        self.session = self.session_for(run_config(self.plan.configurations[first[1][0]], self.settings))
        try:
            self._start()
            self._round(*first)
            for number, order in rounds:
                self._round(number, order)
        finally:
            self._stop()

    def _rounds(self) -> Iterator[tuple[int, list[int]]]:
        """The planned rounds, then (``--until-ci``) more while an interval is too wide."""
        s = self.settings
        for number, order in enumerate(round_orders(len(self.plan.configurations), s.seed), start=1):
            if number > s.repeats:
                if s.until_ci is None or not self._needs_more(s.until_ci, number - 1):
                    return
                self.progress.add(sum(1 for c in self.plan.configurations if c not in self.failed))
            yield number, order

    def _needs_more(self, pct: float, rounds: int) -> bool:
        """``--until-ci``: another round? (Time up: ``SweepStopped``.)"""
        if not self._wide(pct):
            self.notes.append(f"{self.plan.family}: every steps/s interval within ±{pct:g}% after {rounds} rounds")
            return False
        if self.clock.up:
            raise SweepStopped(self._time_up_status(), ExitCode.OK)
        return True

    def _wide(self, pct: float) -> list[str]:
        """The configurations whose steps/s interval is wider than ±``pct``%, with their width."""
        summaries = summarize(self.plan.configurations, self.results)
        return [
            f"{s.config.name} ±{'?' if rel is None else f'{rel:.1f}'}%" for s, rel in wide_intervals(summaries, pct)
        ]

    def _time_up_status(self) -> str:
        """Why the sweep stopped at ``--max-minutes`` (and, with ``--until-ci``, what is still wide)."""
        status = f"--max-minutes {self.settings.max_minutes:g} reached"
        pct = self.settings.until_ci
        wide = self._wide(pct) if pct is not None else []
        if wide:
            status += f"; still wider than ±{pct:g}%: {', '.join(wide)}"
        return status

    def _round(self, number: int, order: list[int]) -> None:
        """Measure each configuration once in ``order`` (failed ones are left out)."""
        for i in order:
            config = self.plan.configurations[i]
            if config in self.failed:
                continue
            if self.clock.up:
                raise SweepStopped(self._time_up_status(), ExitCode.OK)
            self._unit(config, number)

    def _unit(self, config: Configuration, repeat: int) -> None:
        """Switch to ``config``, measure it once; a refusal is recorded and the config dropped."""
        self.progress.start_unit(config.name, repeat, self.settings.repeats)
        try:
            since = self._switch(config)
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
            if isinstance(msg, GpuSample):
                self.recent_gpu.add(msg)
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

    def _start(self) -> None:
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

    def _switch(self, config: Configuration) -> float:
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

    def _answer(self, control: Control, what: str, timeout: float, waiting_for: str, part: str) -> Event:
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
        answer = self._answer(
            TimeStages(STAGE_STEPS), "stages", STAGES_TIMEOUT_S, f"stage times of {config.name}", "timing_stages"
        )
        return StageTimes.from_details(answer.details) if answer.kind == EventKind.MEASURED else None

    def _trace(self, config: Configuration) -> None:
        """A profiler window after the measurement (in no window): the trace to ``OUT/traces``; a failure said."""
        assert self.settings.trace_steps
        self.progress.status(f"{config.name} · profiling {self.settings.trace_steps} steps")
        control = TraceWindow(self.settings.trace_steps)
        answer = self._answer(control, "trace", STAGES_TIMEOUT_S, f"profiler window of {config.name}", "profiling")
        self.progress.status(f"{config.name} · {answer.message}")

    def _stop(self) -> None:
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


# -- the sweep -------------------------------------------------------------------------------------
def _say(text: str) -> None:
    """A diagnostic line on stderr."""
    print(f"gpudash: {text}", file=sys.stderr, flush=True)


def _session_for(plan: SweepPlan, family: str) -> Callable[[RunConfig], EngineSession]:
    """Make a family's session, its workload log in the output directory."""
    from gpudash.host.session import EngineSession

    return lambda config: EngineSession(config, log_path=plan.out_dir / f"sweep-{family}.log")


def _measure_all(plan: SweepPlan, report: SweepReport, progress: SweepProgress) -> tuple[str, ExitCode]:
    """Every family in turn; returns (status, exit code). The report gets every finished row."""
    clock = Clock(plan.settings.max_minutes)
    with _Interrupted() as interrupted:
        try:
            for fp in plan.families:
                run = FamilyRun(
                    fp,
                    plan.settings,
                    session_for=_session_for(plan, fp.family),
                    interrupted=interrupted,
                    progress=progress,
                    clock=clock,
                    recorder=report,
                )
                try:
                    run.run()
                finally:
                    report.add_family(fp, run.results, run.notes)
        except SweepStopped as exc:
            return exc.status, exc.code
        except KeyboardInterrupt:  # a second Ctrl-C while the child was stopping
            return "interrupted by SIGINT", ExitCode.INTERRUPTED
    return "done", ExitCode.OK


def run_sweep(plan: SweepPlan, *, quiet: bool = False, as_json: bool = False) -> int:
    """Measure ``plan`` and write ``sweep.csv`` (row by row), ``sweep.json``, ``sweep.md`` and the
    plots into ``plan.out_dir``; returns the exit status (an ``ExitCode``); ``as_json``: the results on stdout."""
    from gpudash.sweep.report import SweepReport, summary_row

    started, s = time.monotonic(), plan.settings
    planned_min = plan.planned_s / 60
    if planned_min > s.max_minutes:
        _say(
            f"the planned {plan.units} measurements take about {planned_min:.0f} min: "
            f"those after --max-minutes {s.max_minutes:g} are left out"
        )
    try:
        report = SweepReport(plan)
    except OSError as exc:
        _say(f"error: cannot write in {plan.out_dir}: {exc.strerror or exc}")
        return ExitCode.FAILED
    with SweepProgress(quiet, plan.units) as progress:
        try:
            status, code = _measure_all(plan, report, progress)
        except OSError as exc:  # writing a row failed (a full disk)
            status, code = f"write failed: {exc.strerror or exc}", ExitCode.FAILED
    if code == ExitCode.OK and not any(not r.error for r in report.results):
        status, code = "nothing could be measured", ExitCode.FAILED
    written = report.finish(status, code, time.monotonic() - started)
    _final_lines(report, status, code, written, quiet)
    if as_json:  # sweep.json's document, with each configuration's summary row (sweep.csv's)
        rows = [summary_row(c) for _, summaries in report.summaries for c in summaries]
        print(json.dumps({**report.meta, "configurations": rows}, indent=2, default=str), flush=True)
    return code


def _final_lines(report: SweepReport, status: str, code: ExitCode, written: list[str], quiet: bool) -> None:
    """The last lines on stderr: a failure always; unless quiet, the summaries and the files."""
    if code == ExitCode.FAILED:
        _say(f"error: {status}")
    if quiet:
        return
    for line in report.summary_lines():
        _say(line)
    if code != ExitCode.FAILED:
        _say(status)
    for note in report.notes:
        _say(note)
    _say(f"wrote {', '.join(written)} in {report.out_dir}")


def main(argv: list[str]) -> int:
    """``gpudash sweep ...``: check the arguments (``gpudash.sweep.plan``), then run the sweep."""
    parsed = parse_plan(argv, build_parser(), plan_from_args)
    if parsed is None:
        return ExitCode.USAGE
    args, plan = parsed
    for line in plan.skipped:
        print(f"gpudash: skipping {line}", file=sys.stderr, flush=True)
    return run_sweep(plan, quiet=args.quiet, as_json=args.json)
