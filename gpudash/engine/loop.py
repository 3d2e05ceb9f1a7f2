"""The step loop: run a workload's steps, measure them, apply controls at step boundaries.

``StepLoop`` runs in the workload child (``gpudash.engine.child``) and, in-process, in benchmarks
and tests. It holds the per-step path (step, count, sample) and the controls' dispatch; a change of
configuration is ``gpudash.engine.reconfigure``'s, a measurement between sample windows (stages,
scaling, profiler) ``gpudash.engine.measure_windows``'s. How steps are measured without changing
them: ``gpudash.engine.measure``. Torch is imported only inside functions here, so
``import gpudash.engine.loop`` stays cheap.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from gpudash.core.protocol import (
    Control,
    Diagnose,
    Event,
    EventKind,
    LossEffect,
    MeasureScaling,
    Pause,
    Resume,
    Sample,
    SetBatchSize,
    SetKnob,
    SetKnobs,
    SetVariant,
    Stop,
    SwitchWorkload,
    TimeStages,
    TraceWindow,
)
from gpudash.engine import measure_windows, reconfigure
from gpudash.engine.events import Emit, plain
from gpudash.engine.measure import (
    LossReader,
    StepTimer,
    SyncCounter,
    cuda_memory_mib,
    loss_reader,
    percentile,
    step_timer,
)
from gpudash.engine.reconfigure import Builder, ChangeState

if TYPE_CHECKING:  # pragma: no cover
    from gpudash.core.faults import Fault
    from workloads.base import Workload

ControlSource = Callable[[float], "Control | None"]  # wait up to N seconds (0: don't wait)
CONTROL_CHECK_S = 0.005  # look for controls at most this often (each check is a syscall)
TIMER_POLL_S = 0.002  # ask the step timer for completed steps at most this often (each ask is a CUDA call)


class Window:
    """What was measured since the last sample or configuration change."""

    def __init__(self, start: float, interval_s: float) -> None:
        self.start = start
        self.next_sample = start + interval_s  # when the window's sample is due
        self.steps = 0  # steps completed
        self.samples = 0  # samples (examples) of the completed steps
        self.issued = 0  # steps issued
        self.syncs = 0  # syncs counted inside the issued steps
        self.ms: list[float] = []  # the completed steps' times

    def add(self, done: list[float | None], samples_per_step: int) -> None:
        """Count completed steps (``done``: their times in ms, None where unknown)."""
        self.steps += len(done)
        self.samples += len(done) * samples_per_step
        self.ms.extend(d for d in done if d is not None)

    def sample(
        self,
        now: float,
        workload: Workload,
        totals: tuple[int, int],
        *,
        time_s: float,
        loss: float | None,
        syncs_counted: bool,
        allocator_mib: tuple[float | None, float | None] = (None, None),
        force: bool = False,
    ) -> Sample | None:
        """The window as a ``Sample`` at ``now``; ``totals``: the run's (steps, samples).

        None when the window has no length, or (``force``) when nothing was issued in it."""
        interval = now - self.start
        if interval <= 0 or (force and self.steps == 0 and self.issued == 0):
            return None
        ms = sorted(self.ms)
        syncs = self.syncs / self.issued if syncs_counted and self.issued else None
        steps, samples = totals
        return Sample(
            time_s=time_s,
            workload=workload.info.name,
            variant=workload.variant,
            batch_size=workload.batch_size,
            steps=steps,
            samples=samples,
            interval_s=interval,
            steps_per_s=self.steps / interval,
            samples_per_s=self.samples / interval,
            step_ms_p50=percentile(ms, 50) if ms else None,
            step_ms_p95=percentile(ms, 95) if ms else None,
            syncs_per_step=syncs,
            loss=loss,
            knobs=workload.knobs.text(),
            cuda_allocated_mib=allocator_mib[0],
            cuda_reserved_mib=allocator_mib[1],
        )


class StepLoop:
    """Runs a workload's steps, applies controls at step boundaries, emits samples and events.

    Used by the child process (``gpudash.engine.child``) and, in-process, by benchmarks and tests.
    ``controls(timeout)`` returns the next control or None (waiting up to ``timeout`` s).
    ``builder(workload, variant, batch_size)`` makes a new workload for ``SwitchWorkload``.
    """

    def __init__(
        self,
        workload: Workload,
        *,
        emit: Emit,
        controls: ControlSource | None = None,
        builder: Builder | None = None,
        sample_interval_s: float = 0.25,
        count_syncs: bool | None = None,
        max_steps: int | None = None,
        t0: float | None = None,
        clock: Callable[[], float] = time.monotonic,
        trace_dir: str | None = None,
        fault: Fault | None = None,
        lockstep_every: int | None = None,
        agree: Callable[[str | None], str | None] | None = None,
    ) -> None:
        import torch

        self.torch = torch
        self.workload = workload
        self.emit = emit
        self.controls = controls
        self.builder = builder
        self.sample_interval_s = sample_interval_s
        self.max_steps = max_steps
        self.trace_dir = trace_dir
        self.fault = fault  # a test-only injected fault (gpudash.core.faults): raise, hang or exit on cue
        self.changes = ChangeState()  # how many changes were tried, the one an OOM would revert
        # Data-parallel ranks (gpudash.engine.ranks) look for controls every N steps issued, not every few
        # ms: each look is a collective, so every rank must make it at the same step.
        self.lockstep_every = lockstep_every
        # ... and agree on every refusal: ``agree(reason or None)`` returns any rank's reason, so a
        # change one rank refuses is refused by all (gpudash.engine.ranks)
        self.agree = agree
        self._lockstep_checked = -1
        self.clock = clock
        self.t0 = clock() if t0 is None else t0
        self.on_cuda = workload.device.type == "cuda"
        if count_syncs is None:
            count_syncs = self.on_cuda
        self.syncs: SyncCounter | None = SyncCounter() if count_syncs else None
        self.timer: StepTimer = step_timer(torch, self.on_cuda)
        self.loss: LossReader = loss_reader(torch, self.on_cuda)
        # totals for the run
        self.steps_issued = 0
        self.steps_done = 0
        self.samples_done = 0
        self.bookkeeping_syncs = 0
        self._win = Window(0.0, 0.0)  # the current window (opened when the loop runs)
        # steps and seconds of this configuration's samples after its first (a profiler window's
        # reference rate); the first sample after a start or change is warm-up, left out
        self.config_rate = [0.0, 0.0]
        self._config_samples = 0
        self._next_loss = 0.0
        self._next_poll = 0.0
        self._next_control = 0.0
        self._paused = False
        self._stopping = False

    # -- public -----------------------------------------------------------------------------
    def now(self) -> float:
        """Seconds since ``t0``."""
        return self.clock() - self.t0

    def config(self) -> dict[str, str]:
        """What runs now: workload, variant, batch size and device."""
        w = self.workload
        return {
            "workload": w.info.name,
            "variant": w.variant,
            "batch_size": str(w.batch_size),
            "device": str(w.device),
            "knobs": w.knobs.text(),
        }

    def run(self, *, duration_s: float | None = None, steps: int | None = None) -> str:
        """Step until stopped (or for ``duration_s`` / ``steps`` more); returns why it ended."""
        if self.syncs is not None:
            self.syncs.install(self.torch if self.on_cuda else None)
        try:
            return self._run(duration_s, steps)
        finally:
            if self.syncs is not None:
                self.syncs.uninstall()

    def apply(self, control: Control) -> None:
        """Apply one control now (a step boundary)."""
        if isinstance(control, Stop):
            self._stopping = True
        elif isinstance(control, Pause):
            self._pause()
        elif isinstance(control, Resume):
            self._resume()
        elif isinstance(control, SetBatchSize):
            reconfigure.change(self, "batch_size", batch_size=control.batch_size)
        elif isinstance(control, SetVariant):
            reconfigure.change(self, "variant", variant=control.variant)
        elif isinstance(control, (SetKnob, SetKnobs)):
            reconfigure.set_knobs(self, control)
        elif isinstance(control, SwitchWorkload):
            reconfigure.switch(self, control)
        elif isinstance(control, TimeStages):
            measure_windows.time_stages(self, control.steps)
        elif isinstance(control, TraceWindow):
            measure_windows.trace_window(self, control.steps)
        elif isinstance(control, MeasureScaling):
            measure_windows.measure_scaling(self, control.steps)
        elif isinstance(control, Diagnose):
            measure_windows.diagnose(self, control.steps)
        elif isinstance(control, LossEffect):
            measure_windows.loss_effect(self, control.steps)
        else:
            self.event(EventKind.ERROR, message=f"unknown control {control!r}")

    # -- for the loop's collaborators (reconfigure, measure_windows) ------------------------------
    def event(self, kind: EventKind, **kw: Any) -> None:
        """Emit an event now (its details as plain ``str``)."""
        if "details" in kw:
            kw["details"] = plain(kw["details"])
        self.emit(Event(time_s=self.now(), kind=kind, **kw))

    def settle(self, keep_pace: bool = False) -> None:
        """Before a change (and at the end): drain the device, count what completed, send the
        old window. ``keep_pace``: the configuration does not change before the next steps, so
        they are issued in groups of the step time already measured (else one at a time until a
        step of the new configuration is timed)."""
        self.workload.drain()
        self.collect(self.timer.reset(keep_pace))
        self.loss.poll()
        self._send_sample(self.clock(), force=True)

    def collect(self, done: list[float | None]) -> None:
        """Count completed steps (``done``: their times in ms, None where unknown): window and totals."""
        if not done:
            return
        per = self.workload.samples_per_step
        self._win.add(done, per)
        self.steps_done += len(done)
        self.samples_done += len(done) * per

    def open_window(self, now: float) -> None:
        """Start a new sample window at ``now``."""
        self._win = Window(now, self.sample_interval_s)

    def restart_window(self) -> None:
        """After steps that belong to no window (a pause, a measurement, a failed change): count what
        the timer still holds, then open a new window now."""
        self.collect(self.timer.reset())
        self.open_window(self.clock())

    def count_steps_apart(self, steps: int) -> None:
        """Add ``steps`` steps that trained outside every window (a profiler window) to the totals."""
        self.steps_issued += steps
        self.steps_done += steps
        self.samples_done += steps * self.workload.samples_per_step

    def reset_config_rate(self) -> None:
        """A new configuration: its steady rate starts over (its first sample is warm-up)."""
        self.config_rate, self._config_samples = [0.0, 0.0], 0

    def reset_measuring(self) -> None:
        """A new workload: a fresh loss reader, the timer emptied, the rate and window started over."""
        self.loss = loss_reader(self.torch, self.on_cuda)
        self.timer.reset()
        self.reset_config_rate()
        self.open_window(self.clock())

    # -- the loop ------------------------------------------------------------------------------
    def _run(self, duration_s: float | None, steps: int | None) -> str:
        clock = self.clock
        start = clock()
        end = None if duration_s is None else start + duration_s
        step_limit = None if steps is None else self.steps_issued + steps
        self.open_window(start)
        while True:
            now = clock()
            if self.controls is not None and self._controls_due(now):
                self._check_controls(0.0)
            reason = self._end_reason(now, end, step_limit)
            if reason is not None:
                break
            if self._paused:
                self._wait_paused(now)
                continue
            self._issue(self._burst(step_limit))
            self._bookkeep(clock())
        self.settle(keep_pace=True)  # drain, count the last steps, send the last sample
        return reason

    def _controls_due(self, now: float) -> bool:
        """Whether to look for controls now: every CONTROL_CHECK_S, or in lockstep every N steps."""
        if self.lockstep_every is not None:
            issued = self.steps_issued
            if issued % self.lockstep_every or issued == self._lockstep_checked:
                return False
            self._lockstep_checked = issued
            return True
        if now < self._next_control:
            return False
        self._next_control = now + CONTROL_CHECK_S
        return True

    def _end_reason(self, now: float, end: float | None, step_limit: int | None) -> str | None:
        """Why the loop ends now ("stopped", "max_steps", "steps", "duration"), or None."""
        if self._stopping:
            return "stopped"
        if self.max_steps is not None and self.steps_issued >= self.max_steps:
            return "max_steps"
        if step_limit is not None and self.steps_issued >= step_limit:
            return "steps"
        if end is not None and now >= end:
            return "duration"
        return None

    def _wait_paused(self, now: float) -> None:
        self._bookkeep(now)
        if self.controls is not None:
            self._check_controls(min(0.05, self.sample_interval_s))
        else:
            time.sleep(0.01)

    def _burst(self, step_limit: int | None) -> int:
        """How many steps to issue back to back before the next look at the clock, the controls and
        the timer: the rest of the step timer's group (about ``TIMED_GROUP_MS`` of fast steps; 1 for
        a slow step, on the CPU, under an injected fault and in the first steps after a change, where
        an out-of-memory error reverts it), never past a step limit or a data-parallel lockstep."""
        steps = self.timer.burst()
        if steps > 1:
            if self.fault is not None or self.changes.probation > 0:
                return 1
            issued = self.steps_issued
            if self.lockstep_every is not None:
                steps = min(steps, self.lockstep_every - issued % self.lockstep_every)
            for limit in (step_limit, self.max_steps):
                if limit is not None:
                    steps = min(steps, limit - issued)
        return max(1, steps)

    def _issue(self, steps: int) -> None:
        """Issue ``steps`` training steps with nothing of the loop's between them: on a launch-bound
        step a CUDA call between two steps (an event recorded or asked about) costs far more than
        its own time (docs/BENCHMARKS.md, "Engine overhead"), so the loop's bookkeeping runs once
        per burst."""
        syncs = self.syncs
        before = syncs.count if syncs is not None else 0
        timer = self.timer
        oom = False
        if self.fault is not None:
            self.fault.before_step(self.steps_issued + 1)  # one step per burst while a fault is set
        step = self.workload.step
        timer.begin()
        try:
            for _ in range(steps):
                step()
        except self.torch.cuda.OutOfMemoryError:
            if not reconfigure.may_revert(self):  # (true only in bursts of one step: see _burst)
                raise  # (a data-parallel rank cannot revert alone: the run ends, the launcher stops all)
            oom = True
        del step  # a bound method holds its workload, which a revert may have to free first
        if oom:
            reconfigure.revert_after_oom(self)
            return
        timer.end(steps)
        self.loss.offer(self.workload.last_loss)
        self.steps_issued += steps
        self._win.issued += steps
        changes = self.changes
        if changes.probation > 0:
            changes.probation -= steps
        if syncs is not None:
            self._win.syncs += syncs.count - before

    def _bookkeep(self, now: float) -> None:
        """Collect completed steps; issue loss reads; send a sample when one is due."""
        syncs = self.syncs
        before = syncs.count if syncs is not None else 0
        sample_due = now >= self._win.next_sample
        if now >= self._next_poll or sample_due:
            self._next_poll = now + TIMER_POLL_S
            self.collect(self.timer.poll())
        if now >= self._next_loss:
            self._next_loss = now + self.sample_interval_s / 2
            self.loss.want()
            self.loss.poll()
        if sample_due:
            self.loss.poll()  # the freshest loss read so far (on the CPU, the last step's)
            self._send_sample(now)
        if syncs is not None:
            self.bookkeeping_syncs += syncs.count - before

    def _send_sample(self, now: float, *, force: bool = False) -> None:
        sample = self._win.sample(
            now,
            self.workload,
            (self.steps_done, self.samples_done),
            time_s=now - self.t0,
            loss=self.loss.value,
            syncs_counted=self.syncs is not None,
            allocator_mib=cuda_memory_mib(self.torch, self.workload.device) if self.on_cuda else (None, None),
            force=force,
        )
        if sample is not None:
            self.emit(sample)
            if sample.steps > 0 and sample.interval_s > 0 and not force:
                self._config_samples += 1
                if self._config_samples > 1:
                    self.config_rate[0] += sample.steps_per_s * sample.interval_s
                    self.config_rate[1] += sample.interval_s
            self.open_window(now)

    # -- controls ------------------------------------------------------------------------------
    def _check_controls(self, timeout: float) -> None:
        assert self.controls is not None
        control = self.controls(timeout)
        while control is not None:
            self.apply(control)
            control = self.controls(0.0)

    def _pause(self) -> None:
        if not self._paused:
            self.settle()
            self._paused = True
            self.event(EventKind.PAUSED, details=self.config())

    def _resume(self) -> None:
        if self._paused:
            self._paused = False
            self.restart_window()
            self.event(EventKind.RESUMED, details=self.config())
