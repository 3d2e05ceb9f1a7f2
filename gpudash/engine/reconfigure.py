"""Changes of the running configuration, for one step loop (its ``LoopState``) at a step boundary:
a variant, batch size or knobs change, a switch of family, and the revert after an out-of-memory
error in the first steps after a change. Torch is imported only inside functions here."""

from __future__ import annotations

import gc
import time
from typing import TYPE_CHECKING, Any

from gpudash.core.protocol import EventKind, SetKnob, SetKnobs, SwitchWorkload
from gpudash.engine.events import one_line, progress_reports
from gpudash.engine.loop_state import LoopState, Setup
from gpudash.engine.measure import loss_reader

if TYPE_CHECKING:  # pragma: no cover
    from workloads.base import Workload
    from workloads.knobs import Knobs

PROBATION_STEPS = 5  # an out-of-memory error this soon after a change reverts the change


def setup_of(w: Workload) -> Setup:
    """The running configuration of ``w``."""
    return (w.info.name, w.variant, w.batch_size, w.knobs)


def label(setup: Setup) -> str:
    """A configuration as the events name it: "encdec pipelined batch 64 (amp=bf16)"."""
    name, variant, batch, knobs = setup
    extra = f" ({knobs.text()})" if knobs else ""
    return f"{name} {variant} batch {batch}{extra}"


def setting_text(w: Workload, what: str) -> str:
    """What the running workload has for one setting, as the events show it."""
    return w.knobs.text() if what == "knobs" else str(getattr(w, what))


def may_revert(loop: LoopState) -> bool:
    """Whether an out-of-memory error now reverts the last change (never on a data-parallel rank:
    it cannot revert alone; the run ends, the launcher stops all)."""
    state = loop.changes
    return state.probation > 0 and state.previous is not None and loop.workload.world_size <= 1


def set_knobs(loop: LoopState, control: SetKnob | SetKnobs) -> None:
    """Turn one knob on, off or to another value (``SetKnob``), or set them all (``SetKnobs``);
    a bad name or value is an error event."""
    from workloads.catalog_types import WorkloadError
    from workloads.knobs import knob, parse_knobs

    w = loop.workload
    asked = control.knobs if isinstance(control, SetKnobs) else f"{control.name}={control.value}"
    try:
        if isinstance(control, SetKnobs):
            knobs = parse_knobs(control.knobs)
        else:
            knobs = w.knobs.with_value(knob(control.name).name, control.value)
    except WorkloadError as exc:
        _refused(loop, "knobs", w.knobs.text(), asked, one_line(exc))
        return
    change(loop, "knobs", knobs=knobs)


def change(
    loop: LoopState, what: str, *, variant: str | None = None, batch_size: int | None = None, knobs: Knobs | None = None
) -> None:
    """Change the running workload's variant, batch size or knobs; refused: an error event."""
    w = loop.workload
    before = setting_text(w, what)
    requested = {"variant": variant, "batch_size": batch_size, "knobs": knobs}[what]
    requested_text = requested.text() if what == "knobs" else str(requested)  # type: ignore[union-attr]  # the Knobs for 'knobs'
    if requested_text == before:
        return
    previous = setup_of(w)
    refusal = None
    try:  # a bad request is refused without draining the device or cutting the window
        _, _, new_knobs = w.check_change(variant=variant, batch_size=batch_size, knobs=knobs)
    except Exception as exc:  # WorkloadError
        refusal = one_line(exc)
    if loop.agree is not None:
        refusal = loop.agree(refusal)
    if refusal is not None:
        _refused(loop, what, before, requested_text, refusal)
        return
    loop.settle()
    _reconfiguring(loop, what)
    failure = None
    began = time.monotonic()
    try:
        with _warming(loop, new_knobs, what):
            w.reconfigure(variant=variant, batch_size=batch_size, knobs=knobs)
    except Exception as exc:  # OOM while configuring, a failed compile or capture, ...
        if w.world_size > 1:
            raise  # a data-parallel rank cannot go back alone: the run ends, the launcher stops all
        failure = one_line(exc)
    if failure is not None:  # out of the except block: its traceback held what the attempt allocated
        free_memory(loop.torch, loop.on_cuda)
        loop.restart_window()
        _refused(loop, what, before, requested_text, failure)
        return
    if what != "knobs" and new_knobs.value("cuda_graph") != "off":  # the step's graph captured again for it
        loop.compiles.recaptured(f"{what} {setting_text(w, what)}", time.monotonic() - began, loop.now())
    _changed(loop, what, before, setting_text(w, what), previous)


def switch(loop: LoopState, control: SwitchWorkload) -> None:
    """Close the workload and build another; if that fails, build the last good one again."""
    before = loop.workload.info.name
    previous = setup_of(loop.workload)
    if loop.builder is None:
        loop.event(
            EventKind.ERROR,
            what="workload",
            before=before,
            after=control.workload,
            message="switching workloads is not possible here",
        )
        return
    loop.settle()
    _reconfiguring(loop, "workload")
    knobs, dropped = _knobs_for(loop, control)
    data_parallel = loop.workload.world_size > 1
    _retire_workload(loop)
    failure = None
    try:
        with _warming(loop, knobs, "workload"):
            new = loop.builder(control.workload, control.variant, control.batch_size, knobs)
    except Exception as exc:
        if data_parallel:
            raise  # a data-parallel rank cannot go back alone: the run ends, the launcher stops all
        failure = one_line(exc)
    if failure is not None:  # out of the except block: its traceback held the half-built workload
        _rebuild(loop, previous)  # the last good configuration
        _refused(loop, "workload", before, control.workload, failure)
        return
    loop.workload = new
    loop.reset_measuring()
    _changed(loop, "workload", before, new.info.name, previous, note=dropped)


def revert_after_oom(loop: LoopState) -> None:
    """Out of memory in the first steps after a change: back to the previous configuration."""
    assert loop.changes.previous is not None
    previous, loop.changes.previous = loop.changes.previous, None
    name, variant, batch, knobs = previous
    w = loop.workload
    failed = label(setup_of(w))
    other_family = name != w.info.name
    what = (
        "workload"
        if other_family
        else "batch_size"
        if batch != w.batch_size
        else "knobs"
        if knobs != w.knobs
        else "variant"
    )
    loop.changes.probation = 0
    w.drain()
    loop.collect(loop.timer.reset())
    if other_family:
        del w
        _retire_workload(loop)  # the failed one goes before the previous one is built again
        _rebuild(loop, previous)
    else:
        free_memory(loop.torch, loop.on_cuda)  # what the failed step allocated
        w.reconfigure(variant=variant, batch_size=batch, knobs=knobs)
        loop.open_window(loop.clock())
    now = loop.workload
    loop.event(
        EventKind.ERROR,
        what=what,
        before=failed,
        after=label(setup_of(now)),
        message=f"CUDA out of memory with {failed}; back to batch {now.batch_size}, {now.variant}",
    )


# -- the steps of a change ----------------------------------------------------------------------


def _warming(loop: LoopState, knobs: Knobs, what: str) -> Any:
    """Progress reports while a change to ``knobs`` warms up (compiles, captures)."""
    return progress_reports(loop.emit, loop.now, what, knobs.warmups)


def _reconfiguring(loop: LoopState, what: str) -> None:
    """A change is under way (drained, not yet rebuilt): where exit@reconfigure strikes."""
    loop.changes.count += 1
    if loop.fault is not None:
        loop.fault.reconfiguring(loop.changes.count, what)


def _knobs_for(loop: LoopState, control: SwitchWorkload) -> tuple[Knobs, str]:
    """The running knobs that the new workload's variant takes, and a note on those it does not."""
    from workloads.catalog_types import WorkloadError
    from workloads.knobs import KNOBS
    from workloads.registry import family

    w = loop.workload
    knobs = w.knobs
    try:
        fam = family(control.workload)
        info = fam.variant(control.variant or fam.default_variant)
    except WorkloadError:
        return knobs, ""  # the builder reports it
    notes = []
    for name in list(knobs):
        why = KNOBS[name].refusal(info, w.device.type, knobs, w.world_size)
        if why is not None:
            knobs = knobs.with_value(name, "off")
            notes.append(f"{name} turned off: {why}")
    return knobs, "; ".join(notes)


def _retire_workload(loop: LoopState) -> None:
    """Close the running workload and free it (collected, the allocator's cache emptied) before
    the caller builds another. So a switch never holds two families' memory, a revert after an
    out-of-memory error never holds the failed workload's, and the next workload is laid out
    the same whichever family ran before (docs/soak-gpu.md)."""
    loop.workload.close()
    loop.workload = None  # type: ignore[assignment]  # set again by the caller (or _rebuild)
    loop.loss = loss_reader(loop.torch, loop.on_cuda)  # its last loss is the old workload's
    free_memory(loop.torch, loop.on_cuda)


def _rebuild(loop: LoopState, setup: Setup) -> None:
    """After a failure: a fresh workload in ``setup`` (the old one already closed, or retired)."""
    assert loop.builder is not None
    free_memory(loop.torch, loop.on_cuda)
    loop.workload = loop.builder(*setup)
    loop.reset_measuring()


def _refused(loop: LoopState, what: str, before: str, after: str, message: str) -> None:
    loop.event(EventKind.ERROR, what=what, before=before, after=after, message=message)


def _changed(loop: LoopState, what: str, before: str, after: str, previous: Setup, note: str = "") -> None:
    loop.changes.previous = previous
    loop.changes.probation = PROBATION_STEPS
    loop.reset_config_rate()
    loop.open_window(loop.clock())  # a warm-up (compile, capture) happened before: not in it
    loop.event(EventKind.CHANGED, what=what, before=before, after=after, message=note)


def free_memory(torch: Any, on_cuda: bool) -> None:
    """Free what is no longer referenced (cycles included) and give the cache back to the driver."""
    gc.collect()
    if on_cuda:
        torch.cuda.empty_cache()
