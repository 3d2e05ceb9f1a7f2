"""A family's memory measured apart from its sample windows:

- ``memory_peak``: ``steps`` steps recorded with the CUDA caching allocator's history (the
  dashboard's key, ``gpudash diagnose --memory -w …``), then the lines alive at their peak
  (``gpudash.diagnosis.memory_peak``) in a "measured" event; the recorded steps are slower (a Python
  stack an allocation) and stay out of every sample;
- ``count_activations``: one step with the tensors autograd saves for backward counted (each
  storage once, the optimizer's parameters and gradients left out), at the configuration's third
  step and every ``ACTIVATIONS_EVERY`` after: its activations, on its sample rows
  (``mem_activations_mib``), as a job's hooks count a job's.

Torch is the loop's."""

from __future__ import annotations

import contextlib
import time
from typing import TYPE_CHECKING, Any

from gpudash.boot.gpudash_boot import allocator_history as history
from gpudash.boot.gpudash_boot.tensor_bytes import storages
from gpudash.core.protocol import MEMORY_PEAK, EventKind
from gpudash.diagnosis.memory_peak import PeakAnswer, peak_of
from gpudash.engine.events import one_line
from workloads.knobs import OFF  # torch-free

if TYPE_CHECKING:  # pragma: no cover
    from gpudash.engine.loop_state import LoopState as StepLoop

MAX_STEPS = 5
ACTIVATIONS_EVERY = 500  # a configuration's activations counted again every this many steps (first: its third)


def memory_peak(loop: StepLoop, steps: int) -> None:
    """Record ``steps`` steps' allocations; a "measured" event with the lines at their peak, or an
    error event saying why not (the run goes on)."""
    w, torch = loop.workload, loop.torch
    if not w.on_cuda:
        loop.event(
            EventKind.ERROR,
            what=MEMORY_PEAK,
            message="the allocator's history needs CUDA (its caching allocator keeps it); this run is on the CPU",
        )
        return
    steps = max(1, min(MAX_STEPS, steps))
    loop.settle()
    try:
        start = time.perf_counter()
        history.start(torch)
        try:
            for _ in range(steps):
                w.step()
            w.drain()
            wall_ms = (time.perf_counter() - start) * 1e3
            snapshot = history.snapshot(torch)
        finally:
            history.stop(torch)
        index = w.device.index
        peak = peak_of(snapshot, index if index is not None else torch.cuda.current_device(), history.MAX_ENTRIES)
    except Exception as exc:  # noqa: BLE001 - a recording that fails must not end the run
        loop.count_steps_apart(steps)
        loop.restart_window()
        loop.event(EventKind.ERROR, what=MEMORY_PEAK, message=f"the allocator's history: {one_line(exc)}")
        return
    loop.count_steps_apart(steps)
    loop.restart_window()
    cost = f"{steps} steps recorded, {wall_ms / steps:.3g} ms a step"
    answer = PeakAnswer(peak, tuple(peak.lines()))
    loop.event(EventKind.MEASURED, what=MEMORY_PEAK, message=f"{peak.summary()}; {cost}", data=answer)


def count_activations(loop: StepLoop) -> None:
    """One step apart, its saved tensors counted into ``loop.activations`` (bytes); none where the
    step is compiled or a captured CUDA graph (hooks there would see nothing, or recompile), nor in
    a data-parallel run (a step apart would move one rank's steps off the lockstep boundaries)."""
    loop.next_activations = loop.steps_issued + ACTIVATIONS_EVERY
    w, torch = loop.workload, loop.torch
    if w.world_size > 1 or loop.lockstep_every is not None:
        loop.next_activations = 1 << 62  # a data-parallel run's ranks keep in step: no step apart on one
        return
    optimizer = getattr(w, "optimizer", None)
    if optimizer is None or any(w.knobs.get(k) not in (None, OFF) for k in ("compile", "cuda_graph")):
        return
    own = storages(optimizer)
    seen: dict[int, int] = {}

    def pack(tensor: Any) -> Any:
        with contextlib.suppress(Exception):  # a tensor without a plain storage: not counted
            storage = tensor.untyped_storage()
            if (key := storage.data_ptr()) and key not in own:
                seen.setdefault(key, int(storage.nbytes()))
        try:  # detached: an op saving its own output would close a loop a dropped graph never frees
            return tensor.detach()
        except Exception:  # noqa: BLE001 - as it came
            return tensor

    loop.settle(keep_pace=True)
    syncs = loop.syncs
    if syncs is not None:
        syncs.attributing = True  # a training step's syncs are the step's: its lines in the table too
    try:
        try:
            with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
                w.step()
        finally:
            if syncs is not None:  # the step's syncs are its lines; the drain after it is gpudash's
                syncs.attributing = False
                loop.site_steps += 1
        w.drain()
    finally:
        loop.count_steps_apart(1)
        loop.restart_window()
    loop.activations = sum(seen.values())
