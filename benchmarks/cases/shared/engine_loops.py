"""The loops ``engine_overhead`` sets against each other: a workload's bare loop (its ``step()``, or
the user's step written by hand from their ``Training``) and gpudash's own step loop (``StepLoop``,
as the workload process builds it), timed; and both interleaved burst by burst in one engine run."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gpudash.engine.loop import StepLoop
    from workloads.base import Workload
    from workloads.user import UserWorkload

BLOCK = 20  # bursts per block of the interleaved measurement (~1 s of 25 ms bursts)


def build_workload(name: str, variant: str | None, batch: int | None, knobs: tuple[str, ...], device_name: str) -> Any:
    """The workload (its variant, batch size and knobs) on ``device_name``, made the current GPU
    where it names one: (workload, torch.device)."""
    import torch

    from workloads.base import WorkloadOptions
    from workloads.factory import build
    from workloads.knobs import parse_knobs

    device = torch.device(device_name)
    if device.type == "cuda" and device.index is not None:
        torch.cuda.set_device(device)
    options = WorkloadOptions(variant=variant, batch_size=batch, knobs=parse_knobs(",".join(knobs) or "none"))
    return build(name, device, options), device


def workload_loop(w: Workload) -> Callable[[int], None]:
    """The bare loop: ``workload.step()`` ``n`` times."""

    def workload_steps(n: int) -> None:
        for _ in range(n):
            w.step()

    return workload_steps


def hand_loop(w: UserWorkload, resident: int, torch: Any) -> Callable[[int], None]:
    """The user's step as their own loop would take it, from the same Training and batches (the
    workload's modules as its knobs resolved them: compiled, in their layout); with ``resident`` > 0,
    on that many batches copied to the device once, here."""
    pool = w.pool
    assert pool is not None  # a workload with a batch() function
    kept = [w.to_device(pool.next()) for _ in range(resident)]

    def hand_steps(n: int) -> None:
        model, loss_fn, optimizer, frozen = w.model, w.loss_fn, w.optimizer, w.frozen
        for i in range(n):
            x, y = kept[i % len(kept)] if kept else w.to_device(pool.next())
            optimizer.zero_grad(set_to_none=True)
            with w.autocast():
                if frozen is not None:
                    with torch.no_grad():
                        x = frozen(x)
                loss = loss_fn(model(x), y)
            loss.backward()
            optimizer.step()

    return hand_steps


def steps_per_s(steps: Callable[[int], None], n: int, sync: Callable[[], None]) -> float:
    """Steps/s of ``steps(n)``, timed between two synchronizes."""
    sync()
    t = time.perf_counter()
    steps(n)
    sync()
    return n / (time.perf_counter() - t)


def engine_loop(w: Any, sample_interval_s: float, count_syncs: bool, emit: Any) -> Any:
    """The engine's step loop over ``w`` as the child builds it (samples, controls asked for)."""
    from gpudash.engine.loop import StepLoop

    return StepLoop(
        w, emit=emit, sample_interval_s=sample_interval_s, count_syncs=count_syncs, controls=lambda timeout: None
    )


class EngineRuns:
    """The engine's step loop, timed: one StepLoop per setting (sync counting, grouped timing
    events), built on first use as the child builds one, each call running ``n`` more steps.
    ``last`` holds what the samples of the last run with sync counting saw."""

    def __init__(self, w: Workload, sample_interval_s: float, cuda: bool, sync: Callable[[], None]) -> None:
        self.w, self.sample_interval_s, self.cuda, self.sync = w, sample_interval_s, cuda, sync
        self.loops: dict[tuple[bool, bool], tuple[StepLoop, list[object]]] = {}
        self.last: dict[str, object] = {}

    def loop(self, count_syncs: bool, grouped: bool) -> tuple[StepLoop, list[object]]:
        """The loop for this setting and the list its messages go to, built the first time."""
        from gpudash.engine.measure import CudaStepTimer

        if (count_syncs, grouped) not in self.loops:
            emitted: list[object] = []
            loop = engine_loop(self.w, self.sample_interval_s, count_syncs and self.cuda, emitted.append)
            if not grouped and isinstance(loop.timer, CudaStepTimer):
                loop.timer.group_ms = 0.0  # an event after every step
            self.loops[count_syncs, grouped] = (loop, emitted)
        return self.loops[count_syncs, grouped]

    def __call__(self, n: int, count_syncs: bool, grouped: bool = True) -> float:
        """Steps/s of ``n`` more steps of the loop for this setting, its drain included."""
        from gpudash.core.protocol import Sample

        loop, got = self.loop(count_syncs, grouped)
        got.clear()
        self.sync()
        t = time.perf_counter()
        loop.run(steps=n)  # ends with the workload's drain (a synchronize)
        rate = n / (time.perf_counter() - t)
        samples = [m for m in got if isinstance(m, Sample)]
        if count_syncs:
            self.last.update(
                samples=len(samples),
                syncs=[s.syncs_per_step for s in samples][-3:],
                bookkeeping_syncs=loop.bookkeeping_syncs,
                p50=samples[-1].step_ms_p50 if samples else None,
            )
        return rate


def loop_for_interleaving(w: Any, sample_interval_s: float, cuda: bool) -> Any:
    """The engine's loop for ``interleaved``: sync counting on a GPU, as in the rounds."""
    from gpudash.engine.measure import CudaStepTimer

    loop = engine_loop(w, sample_interval_s, cuda, lambda message: None)
    if isinstance(loop.timer, CudaStepTimer):
        # A group's events span the bare steps run between its bursts too, so its measured step
        # time is about twice the engine's: twice the group time keeps the bursts at their size.
        loop.timer.group_ms *= 2
    return loop


def interleaved(loop: Any, bare_steps: Callable[[int], None], sync: Callable[[], None], seconds: float) -> list[Any]:
    """The engine in its steady state against bare steps, alternated burst by burst in one run:
    each burst's (engine steps, engine s, bare steps, bare s).

    The engine loop runs for ``seconds``; at the start of each of its bursts (``timer.begin``)
    the same number of bare steps runs first, timed on the host clock. A burst's engine time is
    from the end of those bare steps to the start of the next burst: its steps, the loop's
    bookkeeping and everything else the loop does between bursts. On a launch-bound step the GPU
    keeps up, so host time is step time; the host's drift moves adjacent 25 ms bursts alike."""
    timer = loop.timer
    begin = timer.begin
    clock = time.perf_counter
    pairs: list[tuple[int, float, int, float]] = []
    last: list[Any] = []  # [end of the last bare steps, steps issued then, bare steps, bare s]

    def begin_after_bare_steps() -> None:
        now = clock()
        if last and loop.steps_issued > last[1]:
            pairs.append((loop.steps_issued - last[1], now - last[0], last[2], last[3]))
        k = max(1, timer.burst())
        t = clock()
        bare_steps(k)
        done = clock()
        last[:] = [done, loop.steps_issued, k, done - t]
        begin()

    loop.run(duration_s=1.0)  # warm-up: the step's pace (the burst size) measured
    sync()
    timer.begin = begin_after_bare_steps
    loop.run(duration_s=seconds)
    timer.begin = begin
    return pairs


def block_rates(pairs: list[Any]) -> tuple[list[float], list[float]]:
    """Bursts read in blocks of ``BLOCK``: each block's engine and bare steps/s."""
    blocks = [pairs[i : i + BLOCK] for i in range(0, len(pairs) - BLOCK + 1, BLOCK)]
    engine = [sum(p[0] for p in b) / sum(p[1] for p in b) for b in blocks]
    bare = [sum(p[2] for p in b) / sum(p[3] for p in b) for b in blocks]
    return engine, bare
