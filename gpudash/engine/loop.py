"""The step loop: run a workload's steps, measure them, apply controls at step boundaries.

``StepLoop`` runs in the workload child (``gpudash.engine.child``) and, in-process, in benchmarks
and tests. How steps are measured without changing them: ``gpudash.engine.measure``. Torch is
imported only inside functions here, so ``import gpudash.engine.loop`` stays cheap.
"""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from gpudash.engine.measure import (LossReader, StepTimer, SyncCounter, cuda_memory_mib, loss_reader, percentile,
                             step_timer)
from gpudash.core.memguard import out_of_memory_message
from gpudash.core.protocol import (
    Control,
    Event,
    EventKind,
    MeasureScaling,
    Message,
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

if TYPE_CHECKING:  # pragma: no cover
    from gpudash.core.faults import Fault
    from workloads.base import Workload
    from workloads.knobs import Knobs

Emit = Callable[[Message], None]
ControlSource = Callable[[float], "Control | None"]  # wait up to N seconds (0: don't wait)
# builder(workload, variant, batch size, knobs): None means the family's default (no knob).
Builder = Callable[[str, "str | None", "int | None", "Knobs | None"], "Workload"]
Setup = tuple[str, str, int, "Knobs"]  # (workload, variant, batch size, knobs)
PROGRESS_EVERY_S = 2.0  # how often a slow change (compile, capture) reports that it is under way
MAX_TRACE_STEPS = 200  # a profiler window's cap in steps
MAX_TRACE_FILES = 20  # traces kept per trace directory: the oldest beyond this are deleted

PROBATION_STEPS = 5  # an out-of-memory error this soon after a change reverts the change
CONTROL_CHECK_S = 0.005  # look for controls at most this often (each check is a syscall)


def one_line(exc: BaseException) -> str:
    """An exception as one line for the user (a failed host allocation: "out of host memory: …")."""
    out_of_memory = out_of_memory_message(exc)
    if out_of_memory is not None:
        return out_of_memory
    text = str(exc).strip().splitlines()
    first = text[0] if text else ""
    name = type(exc).__name__
    if name in ("WorkloadError",):
        return first or name
    return f"{name}: {first}" if first else name


def plain(details: dict[str, Any]) -> dict[str, str]:
    """Details as plain ``str`` (``torch.__version__`` is a str subclass: unpickling it in the
    parent would import torch there; ``str()`` of a str subclass is an exact ``str``)."""
    return {str(k): str(v) for k, v in details.items()}


def _label(setup: Setup) -> str:
    name, variant, batch, knobs = setup
    extra = f" ({knobs.text()})" if knobs else ""
    return f"{name} {variant} batch {batch}{extra}"


@contextmanager
def progress_reports(emit: Emit, now: Callable[[], float], what: str, doing: tuple[str, ...],
                     every_s: float | None = None) -> Iterator[None]:
    """While the body runs (a compile, a graph capture), emit a ``progress`` event every
    ``every_s`` seconds from a helper thread: "compiling… 12 s". Nothing when ``doing`` is empty."""
    if not doing:
        yield
        return
    every_s = PROGRESS_EVERY_S if every_s is None else every_s
    done = threading.Event()
    start = time.monotonic()
    label = " and ".join(dict.fromkeys(doing))

    def tick() -> None:
        while not done.wait(every_s):
            elapsed = time.monotonic() - start
            emit(Event(time_s=now(), kind=EventKind.PROGRESS, what=what, message=f"{label}… {elapsed:.0f} s"))

    thread = threading.Thread(target=tick, name="gpudash-progress", daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()


def _setting_text(w: "Workload", what: str) -> str:
    """What the running workload has for one setting, as the events show it."""
    return w.knobs.text() if what == "knobs" else str(getattr(w, what))


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
        workload: "Workload",
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
        workload: "Workload",
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
        fault: "Fault | None" = None,
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
        self._reconfigurations = 0  # changes applied or attempted past their checks (exit@reconfigure)
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
        self._config_rate = [0.0, 0.0]
        self._config_samples = 0
        self._next_loss = 0.0
        self._next_control = 0.0
        self._paused = False
        self._stopping = False
        self._probation = 0  # steps left in which an OOM reverts the last change
        self._previous: Setup | None = None  # the configuration before it

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
            self._reconfigure("batch_size", batch_size=control.batch_size)
        elif isinstance(control, SetVariant):
            self._reconfigure("variant", variant=control.variant)
        elif isinstance(control, (SetKnob, SetKnobs)):
            self._set_knobs(control)
        elif isinstance(control, SwitchWorkload):
            self._switch(control)
        elif isinstance(control, TimeStages):
            self._time_stages(control.steps)
        elif isinstance(control, TraceWindow):
            self._trace_window(control.steps)
        elif isinstance(control, MeasureScaling):
            self._measure_scaling(control.steps)
        else:
            self._event(EventKind.ERROR, message=f"unknown control {control!r}")

    # -- the loop ------------------------------------------------------------------------------
    def _run(self, duration_s: float | None, steps: int | None) -> str:
        clock = self.clock
        start = clock()
        end = None if duration_s is None else start + duration_s
        step_limit = None if steps is None else self.steps_issued + steps
        self._open_window(start)
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
            self._step()
            self._bookkeep(clock())
        self._settle()  # drain, count the last steps, send the last sample
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

    def _step(self) -> None:
        syncs = self.syncs
        before = syncs.count if syncs is not None else 0
        timer = self.timer
        oom = False
        if self.fault is not None:
            self.fault.before_step(self.steps_issued + 1)
        timer.begin()
        try:
            self.workload.step()
        except self.torch.cuda.OutOfMemoryError:
            if self._probation <= 0 or self._previous is None or self.workload.world_size > 1:
                raise  # (a data-parallel rank cannot revert alone: the run ends, the launcher stops all)
            oom = True
        if oom:
            self._revert_after_oom()
            return
        timer.end()
        self.loss.offer(self.workload.last_loss)
        self.steps_issued += 1
        self._win.issued += 1
        if self._probation > 0:
            self._probation -= 1
        if syncs is not None:
            self._win.syncs += syncs.count - before

    def _bookkeep(self, now: float) -> None:
        """Collect completed steps; issue loss reads; send a sample when one is due."""
        syncs = self.syncs
        before = syncs.count if syncs is not None else 0
        self._collect(self.timer.poll())
        if now >= self._next_loss:
            self._next_loss = now + self.sample_interval_s / 2
            self.loss.want()
            self.loss.poll()
        if now >= self._win.next_sample:
            self._send_sample(now)
        if syncs is not None:
            self.bookkeeping_syncs += syncs.count - before

    def _collect(self, done: list[float | None]) -> None:
        if not done:
            return
        per = self.workload.samples_per_step
        self._win.add(done, per)
        self.steps_done += len(done)
        self.samples_done += len(done) * per

    def _open_window(self, now: float) -> None:
        self._win = Window(now, self.sample_interval_s)

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
                    self._config_rate[0] += sample.steps_per_s * sample.interval_s
                    self._config_rate[1] += sample.interval_s
            self._open_window(now)

    def _settle(self) -> None:
        """Before a change (and at the end): drain the device, count what completed, send the
        old window."""
        self.workload.drain()
        self._collect(self.timer.reset())
        self.loss.poll()
        self._send_sample(self.clock(), force=True)

    def _event(self, kind: EventKind, **kw: Any) -> None:
        if "details" in kw:
            kw["details"] = plain(kw["details"])
        self.emit(Event(time_s=self.now(), kind=kind, **kw))  # type: ignore[arg-type]

    # -- controls ------------------------------------------------------------------------------
    def _check_controls(self, timeout: float) -> None:
        assert self.controls is not None
        control = self.controls(timeout)
        while control is not None:
            self.apply(control)
            control = self.controls(0.0)

    def _pause(self) -> None:
        if not self._paused:
            self._settle()
            self._paused = True
            self._event(EventKind.PAUSED, details=self.config())

    def _resume(self) -> None:
        if self._paused:
            self._paused = False
            self._collect(self.timer.reset())
            self._open_window(self.clock())
            self._event(EventKind.RESUMED, details=self.config())

    def _measure_apart(self, what: str, measure: Callable[[], Any]) -> Any:
        """``measure()`` between two sample windows (its steps in neither); its result, or None after
        an error event (a measurement must not end the run)."""
        self._settle()
        try:
            result = measure()
        except Exception as exc:  # noqa: BLE001
            self._event(EventKind.ERROR, what=what, message=one_line(exc), details=self.config())
            result = None
        self._collect(self.timer.reset())
        self._open_window(self.clock())
        return result

    def _time_stages(self, steps: int) -> None:
        """Time the workload's two stages alone; a "measured" event with the overlap bound."""
        stages = self._measure_apart("stages", lambda: self.workload.time_stages(steps))
        if stages is None:
            return
        (n1, t1), (n2, t2) = stages.items()
        bound = 1000.0 / max(t1, t2)
        message = f"{n1} {t1:.3g} ms, {n2} {t2:.3g} ms alone: overlap bound {bound:.4g} steps/s"
        details = {**self.config(), "stage1": n1, "stage1_ms": t1, "stage2": n2, "stage2_ms": t2,
                   "overlap_bound_steps_per_s": bound}
        self._event(EventKind.MEASURED, what="stages", message=message, details=details)

    def _measure_scaling(self, steps: int) -> None:
        """A data-parallel run's scaling efficiency: the configuration's steps/s (mean of its samples
        after the first) against rank 0 training alone; a "measured" event (what="scaling")."""
        w = self.workload
        if w.world_size < 2:
            self._event(EventKind.ERROR, what="scaling", details=self.config(),
                        message="scaling efficiency needs a data-parallel run (--nproc 2 or more)")
            return
        alone_ms = self._measure_apart("scaling", lambda: w.time_single_rank(steps))
        steps_done, seconds = self._config_rate
        if alone_ms is None:
            return
        if not seconds:
            self._event(EventKind.ERROR, what="scaling", details=self.config(),
                        message="no steady rate of this configuration yet: measure again after a few samples")
            return
        rate, alone = steps_done / seconds, 1000.0 / alone_ms
        efficiency = rate / alone  # (N x b x rate) / (N x b x alone): the same per-rank batch
        message = (f"{w.world_size} ranks at {rate:.4g} steps/s, one rank alone {alone:.4g} steps/s: "
                   f"scaling efficiency {efficiency:.2f}")
        details = {**self.config(), "world_size": w.world_size, "steps_per_s": rate,
                   "single_rank_steps_per_s": alone, "scaling_efficiency": efficiency}
        self._event(EventKind.MEASURED, what="scaling", message=message, details=details)

    def _trace_window(self, steps: int) -> None:
        """Profile ``steps`` steps now; a "measured" event (what="trace") with the figures and the
        trace's path. The window's steps train but stay out of every sample (profiling slows them)."""
        from gpudash.engine import traces

        w = self.workload
        steps = max(1, min(steps, MAX_TRACE_STEPS))
        if self.trace_dir is None and w.world_size > 1:
            self._follow_window(steps)
            return
        if self.trace_dir is None:
            self._event(EventKind.ERROR, what="trace", message="this run has no trace directory",
                        details=self.config())
            return
        self._settle()
        start_s = self.now()
        try:
            path, fig = traces.profile_window(self.torch, w, steps, self.trace_dir, self.now(), MAX_TRACE_FILES)
        except Exception as exc:  # noqa: BLE001 - a failing profiler must not end the run
            self._collect(self.timer.reset())
            self._open_window(self.clock())
            self._event(EventKind.ERROR, what="trace", message=f"profiler window failed: {one_line(exc)}",
                        details=self.config())
            return
        self.steps_issued += steps
        self.steps_done += steps
        self.samples_done += steps * w.samples_per_step
        self._collect(self.timer.reset())
        self._open_window(self.clock())
        details = {**self.config(), **fig.details(), "trace_path": str(path), "trace_start_s": f"{start_s:.3f}"}
        message = fig.summary()
        bound = fig.overlap_bound
        if bound is not None:
            stages = ", ".join(f"{n} {ms:.3g}" for n, ms in fig.stage_ms_per_step.items())
            message += f"; stages {stages} ms/step on the GPU: overlap bound {bound:.4g} steps/s"
            steps, seconds = self._config_rate
            if steps > 0 and seconds > 0:
                pct = 100.0 * steps / seconds / bound
                details["pct_of_overlap_bound"] = f"{pct:.4g}"
                message += f", running at {pct:.0f}% of it"
        self._event(EventKind.MEASURED, what="trace", message=f"{message} → {path}", details=details)

    def _follow_window(self, steps: int) -> None:
        """A data-parallel rank other than 0 during rank 0's profiler window: the same steps (their
        all-reduces pair with rank 0's), unprofiled, kept out of the samples as rank 0's are."""
        w = self.workload

        def take_steps() -> None:
            for _ in range(steps):
                w.step()
            w.drain()

        self._measure_apart("trace", take_steps)
        self.steps_issued += steps
        self.steps_done += steps
        self.samples_done += steps * w.samples_per_step

    def _setup(self) -> Setup:
        w = self.workload
        return (w.info.name, w.variant, w.batch_size, w.knobs)

    def _set_knobs(self, control: SetKnob | SetKnobs) -> None:
        """Turn one knob on, off or to another value (``SetKnob``), or set them all (``SetKnobs``);
        a bad name or value is an error event."""
        from workloads.knobs import knob, parse_knobs
        from workloads.registry import WorkloadError

        w = self.workload
        asked = control.knobs if isinstance(control, SetKnobs) else f"{control.name}={control.value}"
        try:
            if isinstance(control, SetKnobs):
                knobs = parse_knobs(control.knobs)
            else:
                knobs = w.knobs.with_value(knob(control.name).name, control.value)
        except WorkloadError as exc:
            self._refused("knobs", w.knobs.text(), asked, one_line(exc))
            return
        self._reconfigure("knobs", knobs=knobs)

    def _warming(self, knobs: "Knobs", what: str) -> Any:
        """Progress reports while a change to ``knobs`` warms up (compiles, captures)."""
        return progress_reports(self.emit, self.now, what, knobs.warmups)

    def _reconfigure(self, what: str, *, variant: str | None = None, batch_size: int | None = None,
                     knobs: "Knobs | None" = None) -> None:
        """Change the running workload's variant, batch size or knobs; refused: an error event."""
        w = self.workload
        before = _setting_text(w, what)
        requested = {"variant": variant, "batch_size": batch_size, "knobs": knobs}[what]
        requested_text = requested.text() if what == "knobs" else str(requested)  # type: ignore[union-attr]
        if requested_text == before:
            return
        previous = self._setup()
        refusal = None
        try:  # a bad request is refused without draining the device or cutting the window
            _, _, new_knobs = w.check_change(variant=variant, batch_size=batch_size, knobs=knobs)
        except Exception as exc:  # WorkloadError
            refusal = one_line(exc)
        if self.agree is not None:
            refusal = self.agree(refusal)
        if refusal is not None:
            self._refused(what, before, requested_text, refusal)
            return
        self._settle()
        self._reconfiguring(what)
        failure = None
        try:
            with self._warming(new_knobs, what):
                w.reconfigure(variant=variant, batch_size=batch_size, knobs=knobs)
        except Exception as exc:  # OOM while configuring, a failed compile or capture, ...
            if w.world_size > 1:
                raise  # a data-parallel rank cannot go back alone: the run ends, the launcher stops all
            failure = one_line(exc)
        if failure is not None:  # out of the except block: its traceback held what the attempt allocated
            self._free_memory()
            self._collect(self.timer.reset())
            self._open_window(self.clock())
            self._refused(what, before, requested_text, failure)
            return
        self._changed(what, before, _setting_text(w, what), previous)

    def _switch(self, control: SwitchWorkload) -> None:
        """Close the workload and build another; if that fails, build the last good one again."""
        before = self.workload.info.name
        previous = self._setup()
        if self.builder is None:
            self._event(EventKind.ERROR, what="workload", before=before, after=control.workload,
                        message="switching workloads is not possible here")
            return
        self._settle()
        self._reconfiguring("workload")
        knobs, dropped = self._knobs_for(control)
        data_parallel = self.workload.world_size > 1
        self._retire_workload()
        failure = None
        try:
            with self._warming(knobs, "workload"):
                new = self.builder(control.workload, control.variant, control.batch_size, knobs)
        except Exception as exc:
            if data_parallel:
                raise  # a data-parallel rank cannot go back alone: the run ends, the launcher stops all
            failure = one_line(exc)
        if failure is not None:  # out of the except block: its traceback held the half-built workload
            self._rebuild(previous)  # the last good configuration
            self._refused("workload", before, control.workload, failure)
            return
        self.workload = new
        self._reset_measuring()
        self._changed("workload", before, new.info.name, previous, note=dropped)

    def _retire_workload(self) -> None:
        """Close the running workload and free it (collected, the allocator's cache emptied) before
        the caller builds another. So a switch never holds two families' memory, a revert after an
        out-of-memory error never holds the failed workload's, and the next workload is laid out
        the same whichever family ran before (docs/soak-gpu.md)."""
        self.workload.close()
        self.workload = None  # type: ignore[assignment]  # set again by the caller (or _rebuild)
        self.loss = loss_reader(self.torch, self.on_cuda)  # its last loss is the old workload's
        self._free_memory()

    def _reconfiguring(self, what: str) -> None:
        """A change is under way (drained, not yet rebuilt): where exit@reconfigure strikes."""
        self._reconfigurations += 1
        if self.fault is not None:
            self.fault.reconfiguring(self._reconfigurations, what)

    def _knobs_for(self, control: SwitchWorkload) -> "tuple[Knobs, str]":
        """The running knobs that the new workload's variant takes, and a note on those it does not."""
        from workloads.knobs import KNOBS
        from workloads.registry import WorkloadError, family

        knobs = self.workload.knobs
        try:
            fam = family(control.workload)
            info = fam.variant(control.variant or fam.default_variant)
        except WorkloadError:
            return knobs, ""  # the builder reports it
        notes = []
        for name in list(knobs):
            why = KNOBS[name].refusal(info, self.workload.device.type, knobs, self.workload.world_size)
            if why is not None:
                knobs = knobs.with_value(name, "off")
                notes.append(f"{name} turned off: {why}")
        return knobs, "; ".join(notes)

    def _refused(self, what: str, before: str, after: str, message: str) -> None:
        self._event(EventKind.ERROR, what=what, before=before, after=after, message=message,
                    details=self.config())

    def _changed(self, what: str, before: str, after: str, previous: Setup, note: str = "") -> None:
        self._previous = previous
        self._probation = PROBATION_STEPS
        self._config_rate, self._config_samples = [0.0, 0.0], 0
        self._open_window(self.clock())  # a warm-up (compile, capture) happened before: not in it
        self._event(EventKind.CHANGED, what=what, before=before, after=after, message=note,
                    details=self.config())

    def _rebuild(self, setup: Setup) -> None:
        """After a failure: a fresh workload in ``setup`` (the old one already closed, or retired)."""
        assert self.builder is not None
        self._free_memory()
        self.workload = self.builder(*setup)
        self._reset_measuring()

    def _reset_measuring(self) -> None:
        self.loss = loss_reader(self.torch, self.on_cuda)
        self.timer.reset()
        self._config_rate, self._config_samples = [0.0, 0.0], 0
        self._open_window(self.clock())

    def _free_memory(self) -> None:
        """Free what is no longer referenced (cycles included) and give the cache back to the driver."""
        gc.collect()
        if self.on_cuda:
            self.torch.cuda.empty_cache()

    def _revert_after_oom(self) -> None:
        """Out of memory in the first steps after a change: back to the previous configuration."""
        assert self._previous is not None
        previous, self._previous = self._previous, None
        name, variant, batch, knobs = previous
        w = self.workload
        failed = _label(self._setup())
        other_family = name != w.info.name
        what = ("workload" if other_family else "batch_size" if batch != w.batch_size
                else "knobs" if knobs != w.knobs else "variant")
        self._probation = 0
        w.drain()
        self._collect(self.timer.reset())
        if other_family:
            del w
            self._retire_workload()  # the failed one goes before the previous one is built again
            self._rebuild(previous)
        else:
            self._free_memory()  # what the failed step allocated
            w.reconfigure(variant=variant, batch_size=batch, knobs=knobs)
            self._open_window(self.clock())
        now = self.workload
        self._event(
            EventKind.ERROR,
            what=what,
            before=failed,
            after=_label(self._setup()),
            message=f"CUDA out of memory with {failed}; back to batch {now.batch_size}, {now.variant}",
            details=self.config(),
        )
