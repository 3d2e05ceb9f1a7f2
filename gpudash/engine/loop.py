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

from gpudash.core.protocol import (
    Control,
    Diagnose,
    EventKind,
    LossEffect,
    MeasureScaling,
    MemoryPeak,
    Pause,
    Resume,
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
from gpudash.engine.loop_state import ControlSource, LoopState
from gpudash.engine.memory_window import count_activations, memory_peak

__all__ = ["ControlSource", "StepLoop"]

CONTROL_CHECK_S = 0.005  # look for controls at most this often (each check is a syscall)
TIMER_POLL_S = 0.002  # ask the step timer for completed steps at most this often (each ask is a CUDA call)


class StepLoop(LoopState):
    """Runs a workload's steps, applies controls at step boundaries, emits samples and events.

    Used by the child process (``gpudash.engine.child``) and, in-process, by benchmarks and tests.
    ``controls(timeout)`` returns the next control or None (waiting up to ``timeout`` s).
    ``builder(workload, variant, batch_size)`` makes a new workload for ``SwitchWorkload``.
    The state, and what ``reconfigure`` and ``measure_windows`` call, is ``LoopState``'s.
    """

    def run(self, *, duration_s: float | None = None, steps: int | None = None) -> str:
        """Step until stopped (or for ``duration_s`` / ``steps`` more); returns why it ended."""
        if self.syncs is not None:
            self.syncs.install(self.torch if self.on_cuda else None)
        try:
            return self._run(duration_s, steps)
        finally:
            self.compiles.poll(self.steps_done, self.now())
            self.compiles.close()
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
        elif isinstance(control, MemoryPeak):
            memory_peak(self, control.steps)
        else:
            self.event(EventKind.ERROR, message=f"unknown control {control!r}")
        self.compiles.poll(self.steps_done, self.now())  # what a change compiled (a batch change recompiles)

    # -- the loop ------------------------------------------------------------------------------
    def _run(self, duration_s: float | None, steps: int | None) -> str:
        if self.model_flops is not None and self.model_flops.current is None:
            self.count_model_flops()  # the first configuration's, before its first window
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
            if self.steps_issued >= self.next_activations:
                count_activations(self)  # one step apart, its saved tensors counted
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
        if syncs is not None:
            syncs.attributing = True  # these steps' syncs get a site; the loop's own do not
        timer.begin()
        try:
            for _ in range(steps):
                step()
        except self.torch.cuda.OutOfMemoryError:
            if not reconfigure.may_revert(self):  # (true only in bursts of one step: see _burst)
                raise  # (a data-parallel rank cannot revert alone: the run ends, the launcher stops all)
            oom = True
        finally:
            if syncs is not None:
                syncs.attributing = False
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
            self.site_steps += steps

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
            self.compiles.poll(self.steps_done, self.now())  # what the compile knob compiled since
            self._send_sample(now)
        if syncs is not None:
            self.bookkeeping_syncs += syncs.count - before

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
            self.event(EventKind.PAUSED)

    def _resume(self) -> None:
        if self._paused:
            self._paused = False
            self.restart_window()
            self.event(EventKind.RESUMED)
