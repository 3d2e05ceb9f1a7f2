"""The dashboard's asks of a live run (``RunRequests``): a variant, a workload, a batch size, a
pause, a measurement window. Each is checked here first against what runs (the catalog, the
device, a window already under way) and then sent as a control through the controller's ``send``,
which refuses it in a replay or once the run has ended; each returns the ``Notice`` to show.

A part of ``gpudash.tui.controller.DashController`` (its ``requests``), apart because it is a job of
its own; it reads the controller's state through ``SteeredRun``. Textual-free.
"""

from __future__ import annotations

from typing import Protocol

from gpudash.core import protocol
from gpudash.core.protocol import Control, RunConfig
from gpudash.tui.notices import Notice, error, warning
from gpudash.tui.state import DashState
from workloads.catalog_types import FamilyInfo  # torch-free

TRACE_STEPS = 20  # steps in a profiler window asked for from the dashboard


class SteeredRun(Protocol):
    """What the requests read of the run and send through (``DashController``'s)."""

    state: DashState
    config: RunConfig
    replay: bool
    pending_batch: int | None  # a batch size asked for, not yet answered
    pending_trace: bool  # a profiler window asked for, not yet answered
    pending_diagnosis: bool  # a diagnosis window asked for, not yet answered

    def send(self, control: Control, note: str) -> Notice: ...

    def family(self) -> FamilyInfo | None: ...

    def read_only(self, what: str) -> Notice: ...


class RunRequests:
    """The asks of ``run`` that become controls (the knobs' are ``KnobSteering``'s, tune's
    ``TuneRequests``')."""

    def __init__(self, run: SteeredRun) -> None:
        self.run = run

    def refusal(self, fam: FamilyInfo, variant: str) -> str | None:
        """Why ``variant`` cannot run on this run's device (the catalog's message)."""
        device = self.run.state.device
        if device == "auto":  # not known yet: the workload itself will say
            return None
        return fam.refusal(variant, device)

    def toggle_pipeline(self) -> Notice:
        run = self.run.state.run
        fam = self.run.family()
        target = fam.pipeline_target(run.variant) if fam else None
        if fam is None or target is None:
            return warning(f"{run.workload or 'this workload'} has no serial ↔ pipelined pair; v cycles its variants")
        refusal = self.refusal(fam, target)
        if refusal:
            return error(f"✗ {refusal}; this run is on the CPU — staying on {run.variant}")
        return self.run.send(protocol.SetVariant(target), f"switching to {target}…")

    def next_variant(self) -> Notice:
        fam = self.run.family()
        if fam is None:
            return warning("the workload is not known yet")
        running = self.run.state.run.variant
        names = list(fam.variant_names)
        i = names.index(running) if running in names else -1
        later = [v for v in names[i + 1 :] + names[: i + 1] if v != running]  # after, wrapping
        skipped = [v for v in later if self.refusal(fam, v)]
        runnable = [v for v in later if v not in skipped]
        if not runnable:
            why = f" ({', '.join(skipped)} need CUDA)" if skipped else ""
            return warning(f"no other variant of {fam.name} runs here{why}")
        cand = runnable[0]
        passed = [v for v in skipped if later.index(v) < later.index(cand)]
        note = f"switching to {cand}…" + (f" (skipped {', '.join(passed)}: needs CUDA)" if passed else "")
        return self.run.send(protocol.SetVariant(cand), note)

    def switch_workload(self, name: str | None) -> Notice | None:
        if not name or name == self.run.state.run.workload:
            return None
        return self.run.send(protocol.SwitchWorkload(name), f"switching to workload {name}…")

    def batch_base(self) -> int | None:
        """The batch size a ×2 / ÷2 starts from: the one asked for last, else the running one."""
        return self.run.pending_batch or self.run.state.run.batch_size or None

    def set_batch(self, n: int) -> Notice:
        """Ask for batch size ``n``, checked at the edge (the prompt parses it; ×2/÷2 stay ≥ 1)."""
        note = f"batch size {self.run.state.run.batch_size} → {n} requested…"
        return self.run.send(protocol.SetBatchSize(n), note)

    def scale_batch(self, double: bool) -> Notice:
        b = self.batch_base()
        if b is None:
            return warning("the batch size is not known until the workload has started")
        if not double and b <= 1:
            return error("✗ batch size is already 1, the smallest there is")
        return self.set_batch(b * 2 if double else b // 2)

    def pause_resume(self) -> Notice:
        if self.run.state.paused:
            return self.run.send(protocol.Resume(), "resuming…")
        return self.run.send(protocol.Pause(), "pausing at the next step…")

    # -- measurement windows: a "measured" event answers each ---------------------------------
    def time_stages(self) -> Notice:
        """Ask the workload to time its two stages alone."""
        fam = self.run.family()
        if fam is None or fam.pipeline_toggle is None:
            return warning(f"{self.run.state.run.workload or 'this workload'} has no two stages to time apart")
        return self.run.send(protocol.TimeStages(), "timing each stage alone (20 steps each)…")

    def measure_scaling(self) -> Notice:
        """Ask a data-parallel run for its scaling efficiency."""
        if self.run.replay:
            return self.run.read_only("a scaling measurement")
        config = self.run.config
        if config.nproc * config.nnodes < 2:
            return warning("scaling efficiency needs a data-parallel run: start gpudash with --nproc 2 or more")
        return self.run.send(protocol.MeasureScaling(), "rank 0 trains alone for 50 steps (the others wait)…")

    def trace_window(self, steps: int = TRACE_STEPS) -> Notice:
        """Ask for a profiler window of ``steps`` steps."""
        if self.run.replay:
            return self.run.read_only("a profiler window")
        trace_dir = self.run.config.trace_dir
        if not trace_dir:
            return warning("this run has no trace directory: profiler windows are off")
        if self.run.pending_trace:
            return warning("a profiler window is already under way; its figures come when it ends")
        note = f"profiling {steps} steps… (torch.profiler; the trace goes to {trace_dir})"
        return self.run.send(protocol.TraceWindow(steps), note)

    def memory_peak(self, steps: int = protocol.MemoryPeak().steps) -> Notice:
        """Ask for the CUDA allocator's history of ``steps`` steps (its answer names the lines that
        held their peak)."""
        if self.run.replay:
            return self.run.read_only("the allocator's history")
        if self.run.state.device == "cpu":
            return warning("the allocator's history needs CUDA: this run is on the CPU")
        return self.run.send(protocol.MemoryPeak(steps), f"recording the GPU's allocations over {steps} steps…")

    def diagnose(self) -> Notice:
        """Ask for a diagnosis window (its line stays under the charts until the configuration changes)."""
        if self.run.replay:
            return self.run.read_only("a diagnosis")
        if self.run.pending_diagnosis:
            return warning("a diagnosis is under way; its verdict comes when its window ends")
        steps = protocol.Diagnose().steps
        profiled = self.run.state.device != "cpu" or self.run.config.job is not None  # a job's: on the CPU too
        more = f", {steps} more under the profiler" if profiled else ""
        return self.run.send(protocol.Diagnose(), f"diagnosing: {steps} steps timed{more}…")
