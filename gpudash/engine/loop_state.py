"""The step loop's state and what its collaborators call: the workload, the timers, the totals,
the sample window, and the bookkeeping around a change or a measurement (settle, count, open a
window, emit an event).

``LoopState`` is what ``gpudash.engine.reconfigure`` and ``gpudash.engine.measure_windows`` see of
a ``gpudash.engine.loop.StepLoop``, which adds the per-step path and the controls' dispatch to it
(and calls those two): they stand on this module, the loop on them. Torch is imported only inside
functions here.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gpudash.boot.gpudash_boot.tensor_bytes import count_kinds
from gpudash.core.protocol import Control, Event, EventKind, Sample, SyncSites
from gpudash.core.running import Running
from gpudash.engine.compile_events import LoopCompiles
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
from gpudash.engine.model_flops import ModelCount, ModelFlops, with_model_rates

if TYPE_CHECKING:  # pragma: no cover
    from gpudash.core.faults import Fault
    from workloads.base import Workload
    from workloads.knobs import Knobs

ControlSource = Callable[[float], "Control | None"]  # wait up to N seconds (0: don't wait)
# builder(workload, variant, batch size, knobs): None means the family's default (no knob).
Builder = Callable[[str, "str | None", "int | None", "Knobs | None"], "Workload"]
Setup = tuple[str, str, int, "Knobs"]  # (workload, variant, batch size, knobs)
SITES_EVERY = 4  # a configuration's sync sites go out again every this many samples while they count

ACTIVATIONS_AT = 3  # a configuration's step after which its activations are counted (engine.memory_window)


@dataclass
class ChangeState:
    """What a loop keeps of its changes: how many were tried, and the configuration before the last
    one, which an out-of-memory error in its first ``PROBATION_STEPS`` steps goes back to."""

    count: int = 0  # changes applied or attempted past their checks (exit@reconfigure)
    probation: int = 0  # steps left in which an OOM reverts the last change
    previous: Setup | None = None  # the configuration before it


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
        allocator_mib: tuple[float | None, float | None, float | None] = (None, None, None),
        model: ModelCount | None = None,
        force: bool = False,
        kinds: dict[str, int] | None = None,
    ) -> Sample | None:
        """The window as a ``Sample`` at ``now``; ``totals``: the run's (steps, samples).

        None when the window has no length, or (``force``) when nothing was issued in it."""
        interval = now - self.start
        if interval <= 0 or (force and self.steps == 0 and self.issued == 0):
            return None
        ms = sorted(self.ms)
        syncs = self.syncs / self.issued if syncs_counted and self.issued else None
        steps, samples = totals
        sample = Sample(
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
            mem_params_mib=_mib((kinds or {}).get("params")),
            mem_grads_mib=_mib((kinds or {}).get("grads")),
            mem_optimizer_mib=_mib((kinds or {}).get("optimizer")),
            mem_activations_mib=_mib((kinds or {}).get("activations")),
            mem_peak_mib=allocator_mib[2],
        )
        return with_model_rates(sample, model)


def _kinds(workload: Any, activations: int | None) -> dict[str, int] | None:
    """The workload's memory by kind: its optimizer's, and the activations where counted."""
    optimizer = getattr(workload, "optimizer", None)
    if optimizer is None:
        return None
    kinds = count_kinds(optimizer)
    return {**kinds, "activations": activations} if activations is not None else kinds


def _mib(n: int | None) -> float | None:
    return n / 2**20 if n is not None else None


def _sync_counter(count: bool, sites: bool | None) -> SyncCounter | None:
    """The loop's sync counter: with sites (each sync's line) unless ``sites`` is False."""
    return SyncCounter(sites=sites is not False) if count else None


class LoopState:
    """A step loop's workload, timers, totals and window, and the bookkeeping its collaborators
    (``reconfigure``, ``measure_windows``) call; ``StepLoop`` runs the steps on it."""

    def __init__(
        self,
        workload: Workload,
        *,
        emit: Emit,
        controls: ControlSource | None = None,
        builder: Builder | None = None,
        sample_interval_s: float = 0.25,
        count_syncs: bool | None = None,
        sync_sites: bool | None = None,
        max_steps: int | None = None,
        t0: float | None = None,
        clock: Callable[[], float] = time.monotonic,
        trace_dir: str | None = None,
        fault: Fault | None = None,
        lockstep_every: int | None = None,
        agree: Callable[[str | None], str | None] | None = None,
        count_flops: bool = True,
        peak_tflops: float | None = None,
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
        self.syncs: SyncCounter | None = _sync_counter(self.on_cuda if count_syncs is None else count_syncs, sync_sites)
        self.site_steps = 0  # steps of this configuration whose syncs the site table counts
        self._sites_told = 0  # the steps of the last site table sent (0: none yet)
        self.timer: StepTimer = step_timer(torch, self.on_cuda)
        self.compiles = LoopCompiles(emit)  # the compile knob's recompiles and graph breaks, as events
        self.model_flops = ModelFlops(torch, workload.device, peak_tflops) if count_flops else None
        self.loss: LossReader = loss_reader(torch, self.on_cuda)
        self.steps_issued = self.steps_done = self.samples_done = self.bookkeeping_syncs = 0  # the run's totals
        self._win = Window(0.0, 0.0)  # the current window (opened when the loop runs)
        # steps and seconds of this configuration's samples after its first (a profiler window's
        # reference rate); the first sample after a start or change is warm-up, left out
        self.config_rate = [0.0, 0.0]
        self._config_samples = 0
        self.activations: int | None = None  # the configuration's saved-for-backward bytes (engine.memory_window)
        self.next_activations = ACTIVATIONS_AT  # the steps issued after which they are counted next
        self._next_loss = self._next_poll = self._next_control = 0.0
        self._paused = False
        self._stopping = False

    # -- public -------------------------------------------------------------------------------------
    # -- public -----------------------------------------------------------------------------
    def now(self) -> float:
        """Seconds since ``t0``."""
        return self.clock() - self.t0

    def running(self) -> Running:
        """What runs now: workload, variant, batch size, knobs, device and world size."""
        w = self.workload
        return Running(w.info.name, w.variant, w.batch_size, w.knobs.text(), str(w.device), w.world_size)

    # -- for the loop's collaborators (reconfigure, measure_windows) ------------------------------
    # -- for the loop's collaborators (reconfigure, measure_windows) ------------------------------
    def event(self, kind: EventKind, **kw: Any) -> None:
        """Emit an event now, about the configuration running now (its details as plain ``str``)."""
        if "details" in kw:
            kw["details"] = plain(kw["details"])
        self.emit(Event(time_s=self.now(), kind=kind, running=self.running(), **kw))

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

    def count_model_flops(self) -> None:
        """The running configuration's model FLOPs (counted now when new: an eager step that trains
        nothing, before the window that follows opens)."""
        if self.model_flops is not None:
            self.model_flops.refresh(self.workload, self.emit, self.now())

    def reset_config_rate(self) -> None:
        """A new configuration: its steady rate and its sync sites start over (its first sample is
        warm-up), and its model FLOPs are the ones counted for it."""
        self.count_model_flops()
        self.config_rate, self._config_samples = [0.0, 0.0], 0
        self.activations, self.next_activations = None, self.steps_issued + ACTIVATIONS_AT  # counted afresh
        if self.syncs is not None and self.syncs.sites is not None:
            self.syncs.sites.reset()
            self.site_steps, self._sites_told = 0, 0

    def reset_measuring(self) -> None:
        """A new workload: a fresh loss reader, the timer emptied, the rate and window started over."""
        self.loss = loss_reader(self.torch, self.on_cuda)
        self.timer.reset()
        self.reset_config_rate()
        self.open_window(self.clock())

    def _send_sample(self, now: float, *, force: bool = False) -> None:
        sample = self._win.sample(
            now,
            self.workload,
            (self.steps_done, self.samples_done),
            time_s=now - self.t0,
            loss=self.loss.value,
            syncs_counted=self.syncs is not None,
            allocator_mib=cuda_memory_mib(self.torch, self.workload.device) if self.on_cuda else (None, None, None),
            model=self.model_flops.current if self.model_flops is not None else None,
            force=force,
            kinds=_kinds(self.workload, self.activations),
        )
        if sample is not None:
            self.emit(sample)
            self._send_sync_sites(sample.time_s, final=force)
            if sample.steps > 0 and sample.interval_s > 0 and not force:
                self._config_samples += 1
                if self._config_samples > 1:
                    self.config_rate[0] += sample.steps_per_s * sample.interval_s
                    self.config_rate[1] += sample.interval_s
            self.open_window(now)
        elif force:  # nothing since the last sample, whose table may have been skipped: the final one
            self._send_sync_sites(now - self.t0, final=True)

    def _send_sync_sites(self, time_s: float, final: bool = False) -> None:
        """This configuration's sync sites, after a sample: the first time (even when empty: "no
        host-device syncs in the step" is news too), every few samples, and at the
        configuration's last sample (``final``)."""
        syncs = self.syncs
        if syncs is None or syncs.sites is None or self.site_steps == 0:
            return
        sites = syncs.sites
        if self._sites_told == self.site_steps:
            return  # this table went out already
        if self._sites_told and self._config_samples % SITES_EVERY and not final:
            return  # sent before: again every few samples (the steps grow, if nothing else) and at the end
        self._sites_told = self.site_steps
        w = self.workload
        self.emit(
            SyncSites(
                time_s=time_s,
                workload=w.info.name,
                variant=w.variant,
                batch_size=w.batch_size,
                knobs=w.knobs.text(),
                table=sites.table(self.site_steps),
                not_counted=syncs.explicit_not_counted or "",
            )
        )
