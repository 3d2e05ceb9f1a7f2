"""Measurements a ``StepLoop`` takes between two sample windows, their steps in neither: the stages
timed alone (the overlap bound), a data-parallel run's scaling efficiency, a profiler window and
a diagnosis (what bounds the configuration), and what the knobs do to the loss.
Each answers with a "measured" event, or with an error event when it fails (a failed measurement
does not end the run). Torch is imported only inside functions here."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple

from gpudash.boot.gpudash_boot.sync_table import SyncTable
from gpudash.core.protocol import DIAGNOSIS, LOSS_EFFECT, TRACE, EventKind
from gpudash.core.stage_times import StageTimes
from gpudash.core.textfmt import plain
from gpudash.engine.events import one_line

if TYPE_CHECKING:  # pragma: no cover
    from pathlib import Path

    from gpudash.diagnosis.evidence import Evidence

    # what these functions see of a StepLoop: its state, beneath the loop that calls them
    from gpudash.engine.loop_state import LoopState as StepLoop
    from gpudash.engine.trace_figures import TraceFigures

MAX_TRACE_STEPS = 200  # a profiler window's cap in steps
MAX_TRACE_FILES = 20  # traces kept per trace directory: the oldest beyond this are deleted


def failed(loop: StepLoop, what: str, why: str) -> None:
    """A measurement ``what`` not taken: an error event saying ``why`` (the run goes on)."""
    loop.event(EventKind.ERROR, what=what, message=why)


def measure_apart(loop: StepLoop, what: str, measure: Callable[[], Any]) -> Any:
    """``measure()`` between two sample windows (its steps in neither); its result, or None after
    an error event (a measurement must not end the run)."""
    loop.settle()
    try:
        result = measure()
    except Exception as exc:  # noqa: BLE001
        failed(loop, what, one_line(exc))
        result = None
    loop.restart_window()
    return result


def time_stages(loop: StepLoop, steps: int) -> None:
    """Time the workload's two stages alone; a "measured" event with the overlap bound."""
    stages = measure_apart(loop, "stages", lambda: loop.workload.time_stages(steps))
    if stages is None:
        return
    (n1, t1), (n2, t2) = stages.items()
    times = StageTimes(n1, t1, n2, t2)
    message = f"{times.describe()}: overlap bound {plain(times.bound)} steps/s"
    loop.event(EventKind.MEASURED, what="stages", message=message, data=times)


def measure_scaling(loop: StepLoop, steps: int) -> None:
    """A data-parallel run's scaling efficiency: the configuration's steps/s (mean of its samples
    after the first) against rank 0 training alone; a "measured" event (what="scaling")."""
    w = loop.workload
    if w.world_size < 2:
        failed(loop, "scaling", "scaling efficiency needs a data-parallel run (--nproc 2 or more)")
        return
    alone_ms = measure_apart(loop, "scaling", lambda: w.time_single_rank(steps))
    steps_done, seconds = loop.config_rate
    if alone_ms is None:
        return
    if not seconds:
        failed(loop, "scaling", "no steady rate of this configuration yet: measure again after a few samples")
        return
    rate, alone = steps_done / seconds, 1000.0 / alone_ms
    efficiency = rate / alone  # (N x b x rate) / (N x b x alone): the same per-rank batch
    message = (
        f"{w.world_size} ranks at {plain(rate)} steps/s, one rank alone {plain(alone)} steps/s: "
        f"scaling efficiency {efficiency:.2f}"
    )
    details = {
        "world_size": w.world_size,
        "steps_per_s": rate,
        "single_rank_steps_per_s": alone,
        "scaling_efficiency": efficiency,
    }
    loop.event(EventKind.MEASURED, what="scaling", message=message, details=details)


def trace_window(loop: StepLoop, steps: int) -> None:
    """Profile ``steps`` steps now; a "measured" event (what="trace") with the figures and the
    trace's path. The window's steps train but stay out of every sample (profiling slows them)."""
    from gpudash.engine import traces

    w = loop.workload
    steps = max(1, min(steps, MAX_TRACE_STEPS))
    if loop.trace_dir is None and w.world_size > 1:
        _follow_window(loop, steps)
        return
    if loop.trace_dir is None:
        failed(loop, TRACE, "this run has no trace directory")
        return
    loop.settle()
    start_s = loop.now()
    try:
        path, fig = traces.profile_window(loop.torch, w, steps, loop.trace_dir, loop.now(), MAX_TRACE_FILES)
    except Exception as exc:  # noqa: BLE001 - a failing profiler must not end the run
        loop.restart_window()
        failed(loop, TRACE, f"profiler window failed: {one_line(exc)}")
        return
    loop.count_steps_apart(steps)
    loop.restart_window()
    _trace_measured(loop, path, fig, start_s)


def _trace_measured(loop: StepLoop, path: Path, fig: TraceFigures, start_s: float) -> None:
    """The profiler window's "measured" event: its figures, against the overlap bound where the
    family has two stages (and the configuration's steady rate, where there is one yet)."""
    more: dict[str, float] = {}
    message = fig.summary()
    bound = fig.overlap_bound
    if bound is not None:
        stages = ", ".join(f"{n} {ms:.3g}" for n, ms in fig.stage_ms_per_step.items())
        message += f"; stages {stages} ms/step on the GPU: overlap bound {plain(bound)} steps/s"
        steps, seconds = loop.config_rate
        if steps > 0 and seconds > 0:
            pct = 100.0 * steps / seconds / bound
            more["pct_of_overlap_bound"] = pct
            message += f", running at {pct:.0f}% of it"
    note = fig.note(str(path), round(start_s, 3), **more)
    loop.event(EventKind.MEASURED, what=TRACE, message=f"{message} → {path}", data=note)


def _follow_window(loop: StepLoop, steps: int, what: str = TRACE) -> None:
    """A data-parallel rank other than 0 during rank 0's profiler or diagnosis window: the same
    steps (their all-reduces pair with rank 0's), unprofiled, kept out of the samples as rank 0's are."""
    w = loop.workload

    def take_steps() -> None:
        for _ in range(steps):
            w.step()
        w.drain()

    measure_apart(loop, what, take_steps)
    loop.count_steps_apart(steps)


def diagnose(loop: StepLoop, steps: int) -> None:
    """A diagnosis window: ``steps`` steps timed apart (the wait for each batch, the syncs), then on
    a GPU ``steps`` more under the profiler (how busy the GPU is, the all-reduce's exposed part;
    the trace is not kept); a "measured" event (what=DIAGNOSIS) with its findings, which the parent
    judges (``gpudash.diagnosis.judge``). In a data-parallel run rank 0 measures, the other ranks
    take the same steps with it (their all-reduces pair with its)."""
    from gpudash.diagnosis.judge import Findings, WorldView

    w = loop.workload
    steps = max(1, min(steps, MAX_TRACE_STEPS))
    if w.rank_info is not None and w.rank_info.rank != 0:  # rank 0 measures; the others step with it
        _follow_window(loop, steps * (2 if w.on_cuda else 1), DIAGNOSIS)
        return
    began = loop.now()  # the parent judges with GPM's and NVML's figures from before this
    evidence = measure_apart(loop, DIAGNOSIS, lambda: _evidence(loop, steps))
    if evidence is None:
        return
    loop.count_steps_apart(steps * (2 if evidence.gpu_busy_pct is not None else 1))
    ranks = w.rank_info.world_size if w.rank_info is not None else 1
    findings = Findings(evidence, window_start_s=began, world=WorldView(ranks, 0) if ranks > 1 else None)
    loop.event(EventKind.MEASURED, what=DIAGNOSIS, message="judged by the parent", data=findings)


def _evidence(loop: StepLoop, steps: int) -> Evidence:
    """The window's measurements: the timed steps, then (on a GPU) the profiled ones."""
    from gpudash.diagnosis.evidence import Evidence
    from gpudash.engine import traces
    from gpudash.engine.trace_evidence import with_trace

    w = loop.workload
    step_ms, input_ms, syncs, sites = _timed_steps(loop, steps)
    if not w.on_cuda:
        return Evidence(steps=steps, step_ms=step_ms, input_ms=input_ms, syncs_per_step=syncs)
    fig = traces.window_figures(loop.torch, w, steps)
    # Busy, idle and the GPU's time per step all come from the traced window itself (one span, the
    # step markers'), never from the traced kernels over an untraced wall: tracing slows the host,
    # and a ratio across two windows can read a host-bound step as busy (GPU-bound's rule weighs the
    # kernels' time against the untraced step only where it fits in it: parts.gpu_busy_untraced).
    counted = loop.model_flops.current if loop.model_flops else None
    untraced = Evidence(
        steps=steps,
        step_ms=step_ms,
        input_ms=input_ms,
        syncs_per_step=syncs,
        sync_sites=sites,
        dtype=counted.dtype if counted else None,
    )
    return with_trace(untraced, fig)


class TimedSteps(NamedTuple):
    """A diagnosis window's untraced steps: wall ms per step, ms per step waiting for the next
    batch, syncs per step and their sites (None where they cannot be counted)."""

    step_ms: float
    input_ms: float
    syncs: float | None
    sites: SyncTable | None


def _timed_steps(loop: StepLoop, steps: int) -> TimedSteps:
    """``steps`` steps, drained, timed (``TimedSteps``)."""
    import time

    w = loop.workload
    draw = w._next_input  # noqa: SLF001 - timed for the window only (an instance attribute shadows it)
    waited = [0.0]

    def timed_draw() -> Any:
        start = time.perf_counter()
        try:
            return draw()
        finally:
            waited[0] += time.perf_counter() - start

    counter = loop.syncs
    before = counter.count if counter is not None else 0
    w._next_input = timed_draw  # type: ignore[method-assign]  # noqa: SLF001
    try:
        start = time.perf_counter()
        with counter.apart() if counter is not None else contextlib.nullcontext() as sites:
            for _ in range(steps):
                w.step()
        counted = counter.count - before if counter is not None else 0  # the steps', not the drain's
        w.drain()
        wall = time.perf_counter() - start
    finally:
        del w._next_input  # noqa: SLF001 - the method again
    on_gpu = counter is not None and w.on_cuda
    syncs = counted / steps if on_gpu else None
    table = sites.table(steps) if on_gpu and sites is not None else None
    return TimedSteps(1000.0 * wall / steps, 1000.0 * waited[0] / steps, syncs, table)


LOSS_TAIL = 10  # the last losses averaged into each copy's "final" loss


def loss_effect(loop: StepLoop, steps: int) -> None:
    """Train a plain fresh copy (no knob) ``steps`` steps, and the running configuration as many
    from the copy's start (its weights, no optimizer state, the same batches). A "measured" event
    (what=LOSS_EFFECT) with both final losses (the mean of the last ``LOSS_TAIL``), their relative
    difference and the largest difference at any one step. The running workload's training state is
    put back afterwards; its batches go on from where the check left them."""
    w = loop.workload
    if w.knobs.text() == "none":
        failed(loop, LOSS_EFFECT, "no knob is on: there is nothing to compare with the plain run")
        return
    if loop.builder is None or w.world_size > 1:
        failed(loop, LOSS_EFFECT, "the loss check needs a single-process run")
        return
    steps = max(LOSS_TAIL, steps)
    losses = measure_apart(loop, LOSS_EFFECT, lambda: _both_losses(loop, steps))
    if losses is None:
        return
    (plain, plain_s), (knobbed, knob_s) = losses
    tail_plain, tail_knobbed = (sum(x[-LOSS_TAIL:]) / LOSS_TAIL for x in (plain, knobbed))
    scale = max(abs(tail_plain), 1e-12)
    diff_pct = 100.0 * (tail_knobbed - tail_plain) / scale
    worst_pct = 100.0 * max(abs(a - b) / max(abs(a), 1e-12) for a, b in zip(plain, knobbed, strict=True))
    details = {
        "steps": str(steps),
        "plain_loss": f"{tail_plain:.6g}",
        "knob_loss": f"{tail_knobbed:.6g}",
        "diff_pct": f"{diff_pct:.4g}",
        "max_step_diff_pct": f"{worst_pct:.4g}",
        "plain_s": f"{plain_s:.3g}",
        "knob_s": f"{knob_s:.3g}",
    }
    message = (
        f"loss after {steps} steps: {tail_knobbed:.4g} with {w.knobs.text()}, {tail_plain:.4g} plain "
        f"({diff_pct:+.2f}%); the largest difference at one step {worst_pct:.2f}% "
        f"(the plain copy built and trained in {plain_s:.1f} s, the knobs' steps in {knob_s:.1f} s)"
    )
    loop.event(EventKind.MEASURED, what=LOSS_EFFECT, message=message, details=details)


def _both_losses(loop: StepLoop, steps: int) -> tuple[tuple[list[float], float], tuple[list[float], float]]:
    """The losses of a plain fresh copy and of the running workload started as that copy was
    (``workloads.fresh_start``: its knobs' compiled and captured code kept), ``steps`` steps each,
    with each arm's seconds (the backend flags of the running knobs are put back afterwards)."""
    import time

    from workloads import tuning
    from workloads.fresh_start import StartState, starting_as
    from workloads.knobs import Knobs

    w = loop.workload
    assert loop.builder is not None  # checked by the caller
    try:
        t = time.perf_counter()
        with loop.builder(w.info.name, w.variant, w.batch_size, Knobs()) as copy:
            start = StartState.of(copy)
            plain = step_losses(loop.torch, copy, steps)
        plain_s, t = time.perf_counter() - t, time.perf_counter()
        with starting_as(w, start):
            knobbed = step_losses(loop.torch, w, steps)
        return (plain, plain_s), (knobbed, time.perf_counter() - t)
    finally:
        tuning.apply_backend_flags(w.knobs)


def step_losses(torch: Any, w: Any, steps: int) -> list[float]:
    """The losses of ``steps`` steps of ``w``, read back together at the end (a read each step
    would hold the host to the GPU's pace), each copied as it comes (a captured graph writes
    every step's loss into the same tensor)."""
    held = []
    for _ in range(steps):
        w.step()
        held.append(w.last_loss.detach().clone())
    return list(torch.stack(held).float().tolist())  # one read: Python floats
