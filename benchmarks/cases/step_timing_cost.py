"""What timing a step costs the host: a hand-written step loop with and without CUDA events.

The step is the user's own, written by hand from the ``Training`` gpudash was given (copy,
``zero_grad``, loss, ``backward``, ``step``). Each round runs ``steps`` steps of every loop below,
in a shuffled order, timed with the wall clock (one synchronize before and after): the step alone
(*hand*); with a CUDA event (``enable_timing=True``) recorded after each step; the same with an
event without timing; with gpudash's step timer (``CudaStepTimer``: events after groups of steps).
Each loop's time over the hand loop's is read by rounds (``compare_paired``). Needs CUDA."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from benchmarks.harness.case import Unavailable
from benchmarks.harness.context import Run
from benchmarks.harness.params import param
from benchmarks.harness.schedule import Schedule, rounds
from benchmarks.harness.stats import ratio, ratio_text

if TYPE_CHECKING:
    from workloads.user import UserWorkload


@dataclass(frozen=True)
class Params:
    workload: str = param("examples/mine.py:workload", "your own workload (FILE.py:FUNCTION)")
    batch_size: int = param(32, "its batch size")
    steps: int = param(300, "steps per loop per round")
    rounds: int = param(24, "rounds, each loop once a round in a shuffled order")


def hand_step(w: UserWorkload) -> Callable[[], None]:
    """The user's step written by hand from the ``Training``: copy the batch, ``zero_grad``, loss,
    ``backward``, ``step``."""
    device, model, loss_fn, optimizer, pool = w.device, w.model, w.loss_fn, w.optimizer, w.pool
    assert pool is not None, "a workload with a batch() function (not a loader)"

    def step() -> None:
        x, y = (v.to(device, non_blocking=True) for v in pool.next())
        optimizer.zero_grad(set_to_none=True)
        loss_fn(model(x), y).backward()
        optimizer.step()

    return step


def timing_loops(step: Callable[[], None], torch: Any) -> dict[str, Callable[[int], None]]:
    """The loops compared, by name: each runs ``n`` steps, with or without a way of timing them."""
    from gpudash.engine.measure import CudaStepTimer

    stream = torch.cuda.current_stream()

    def hand(n: int) -> None:
        for _ in range(n):
            step()

    def with_events(timing: bool) -> Callable[[int], None]:
        events = [torch.cuda.Event(enable_timing=timing) for _ in range(8)]

        def steps(n: int) -> None:
            for i in range(n):
                step()
                events[i % 8].record(stream)

        return steps

    def with_timer(n: int) -> None:
        timer = CudaStepTimer(torch)
        for _ in range(n):
            timer.begin()
            step()
            timer.end()
            timer.poll()

    return {
        "hand": hand,
        "+ timing event per step": with_events(True),
        "+ plain event per step": with_events(False),
        "+ CudaStepTimer": with_timer,
    }


def us_per_step(loop: Callable[[int], None], steps: int, torch: Any) -> float:
    """µs a step of ``steps`` steps of ``loop``, on the wall clock between two synchronizes."""
    torch.cuda.synchronize()
    t = time.perf_counter()
    loop(steps)
    torch.cuda.synchronize()
    return (time.perf_counter() - t) / steps * 1e6


def timed_loops(run: Run, loops: dict[str, Callable[[int], None]], steps: int, n: int, torch: Any) -> None:
    """``n`` rounds of every loop in a shuffled order, then a row per loop: µs a step, and its time
    over the first loop's (the baseline) read by rounds."""
    for loop in loops.values():
        loop(20)  # warm-up
    arms = {name: (lambda loop=loop: us_per_step(loop, steps, torch)) for name, loop in loops.items()}
    us = rounds(arms, n, Schedule.PAIRS)
    base = next(iter(us))
    table = run.table(
        ["loop", "µs/step, mean", "µs/step, median", f"time over {base} (95% CI)", "verdict"],
        ["---", "--:", "--:", "---", "---"],
    )
    for name, values in us.items():
        run.values(name, values, "µs a step", higher_is_better=False)
        mean, median = f"{statistics.mean(values):.1f}", f"{statistics.median(values):.1f}"
        if name == base:
            run.row(table, name, mean, median, "–", "(baseline)")
            continue
        f = run.keep(f"{name}/{base}", ratio(f"{name}/{base}", us[base], values, higher_is_better=False))
        run.row(table, name, mean, median, ratio_text(f, 3), f.verdict)


def measure(run: Run, p: Params) -> None:
    import torch

    from workloads.base import WorkloadOptions
    from workloads.factory import build
    from workloads.user import UserWorkload

    if not torch.cuda.is_available():
        raise Unavailable("needs CUDA")
    w = build(p.workload, "cuda", WorkloadOptions(batch_size=p.batch_size))
    if not isinstance(w, UserWorkload):
        raise Unavailable("times your own workload (-p workload=FILE.py:FUNCTION), not a family")
    run.comment(f"step timing cost: {p.workload}, batch {p.batch_size}")
    run.comment(f"{p.steps} steps per loop per round, {p.rounds} rounds, shuffled order")
    timed_loops(run, timing_loops(hand_step(w), torch), p.steps, p.rounds, torch)
    w.close()
