"""Engine overhead: steps/s of one workload in a bare loop against in the engine's step loop.

The workload is built once. ABBA rounds run the same number of steps (about ``seconds`` worth) in
each arm: *bare*, ``for _ in range(n): workload.step()`` and one synchronize (with ``hand``, the
user's step written by hand from the ``Training`` gpudash was given: copy the batch, zero_grad,
loss, backward, step); *engine*, gpudash's ``StepLoop`` as the workload process runs it (CUDA-event
timing read back by query(), loss copies, sync counting, samples every ``sample_interval`` s,
control checks), ending with the same drain. ``no_sync_count`` adds the engine without sync
counting; ``per_step_events``, the engine with a timing event after every step. The paired
interval (a round's drift cancels) decides the goal, engine/bare ≥ 0.98; many short rounds pair
more closely than a few long ones on a noisy host.

``interleave`` (with ``rounds=0``: only it) measures the engine as a run spends nearly all its
time, in its steady state: one engine loop runs that long and before each of its bursts the same
number of bare steps runs (``shared.engine_loops.interleaved``)."""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from benchmarks.cases.shared import engine_loops as loops
from benchmarks.harness.case import Unavailable
from benchmarks.harness.context import Run
from benchmarks.harness.params import param
from benchmarks.harness.result import Figure
from benchmarks.harness.schedule import Schedule, rounds
from benchmarks.harness.stats import Target, ratio

GOAL = Target(0.98)  # engine/bare: the interval's low end at or above this


@dataclass(frozen=True)
class Params:
    workload: str = param("encdec", "a family, or FILE.py:FUNCTION (a workload of your own)")
    variant: str | None = param(None, "the variant (none: the family's default)")
    batch_size: int | None = param(None, "the batch size (none: the family's default)")
    device: str = param("cuda", "cuda, cuda:N or cpu")
    seconds: float = param(5.0, "seconds of steps per arm per round")
    rounds: int = param(3, "ABBA rounds (0: only the interleaved run)")
    sample_interval: float = param(0.25, "the engine's sample interval, seconds")
    no_sync_count: bool = param(False, "also the engine without sync counting")
    per_step_events: bool = param(False, "also the engine with a CUDA event after every step (no groups)")
    hand: bool = param(False, "bare: the Training's step by hand (a workload of your own)")
    knob: tuple[str, ...] = param((), "knobs to build the workload with (comma-separated); hand applies them too")
    resident: int = param(0, "with hand: train on N batches kept on the device (no copy in the step)")
    interleave: float = param(0.0, "also run one engine loop this long, bare steps interleaved burst by burst")


def measure(run: Run, p: Params) -> None:
    import torch

    from workloads.user import UserWorkload

    if p.device.startswith("cuda") and not torch.cuda.is_available():
        raise Unavailable("-p device=cuda needs CUDA (-p device=cpu runs on the CPU)")
    w, device = loops.build_workload(p.workload, p.variant, p.batch_size, p.knob, p.device)
    cuda = device.type == "cuda"
    user = w if isinstance(w, UserWorkload) and w.pool is not None else None
    if p.hand and user is None:
        raise Unavailable("hand needs your own workload with a batch() function")
    bare_steps = loops.hand_loop(user, p.resident, torch) if p.hand and user is not None else loops.workload_loop(w)

    def sync() -> None:
        if cuda:
            torch.cuda.synchronize()

    def bare(n: int) -> float:
        return loops.steps_per_s(bare_steps, n, sync)

    engine = loops.EngineRuns(w, p.sample_interval, cuda, sync)
    bare(10)  # warm up (allocator, cuDNN, lazy init), then size n to about `seconds`
    engine(10, True)
    n = max(20, int(bare(50) * p.seconds))
    resident = f" on {p.resident} batches kept on the device" if p.hand and p.resident > 0 else ""
    run.comment(
        f"engine overhead: {p.workload} {w.variant}, batch {w.batch_size}, image {w.image_size}, "
        f"knobs {w.knobs.text()}, bare loop {'by hand' if p.hand else 'workload.step()'}{resident}, on {device}"
    )
    if p.rounds:
        abba_rounds(run, n, bare, engine)
    engine_saw(run, engine.last)
    if p.interleave > 0:
        loop = loops.loop_for_interleaving(w, p.sample_interval, cuda)
        interleaved(run, loops.interleaved(loop, bare_steps, sync, p.interleave), p.interleave)
    w.close()


def abba_rounds(run: Run, n: int, bare: Callable[[int], float], engine: Any) -> None:
    """The rounds, a row each, then the median ratio and the intervals."""
    p: Params = run.params
    arms: dict[str, Callable[[], float]] = {"bare": lambda: bare(n), "engine": lambda: engine(n, True)}
    cols = ["round", "bare steps/s", "engine steps/s", "ratio"]
    if p.no_sync_count:
        arms["engine, no sync count"] = lambda: engine(n, False)
        cols += ["engine, no sync count", "ratio"]
    if p.per_step_events:
        arms["engine, event per step"] = lambda: engine(n, True, grouped=False)
        cols += ["engine, event per step", "ratio"]
    run.comment(f"{n} steps per measurement, {p.rounds} rounds, sample interval {p.sample_interval} s")
    table = run.table(cols)

    def row(i: int, got: dict[str, float]) -> None:
        b = got["bare"]
        cells = [str(i + 1), f"{b:.1f}"] + [
            x for arm in list(got)[1:] for x in (f"{got[arm]:.1f}", f"{got[arm] / b:.3f}")
        ]
        run.row(table, *cells)

    got = rounds(arms, p.rounds, Schedule.ABBA, each=row)
    for arm, values in got.items():
        run.values(arm, values, "steps/s")
    summary(run, got)


def summary(run: Run, got: dict[str, list[float]]) -> None:
    """The median ratio, and with 4 rounds or more the paired intervals and the ratios of means."""
    bares, engines = got["bare"], got["engine"]
    per_step = got.get("engine, event per step", [])
    median = statistics.median(e / b for e, b in zip(engines, bares, strict=True))
    run.line()
    said = f"median engine/bare: {median:.3f} (target {GOAL.text}: {'met' if median >= GOAL.bound else 'not met'})"
    run.say("median engine/bare", Figure("value", said, median, target=GOAL.text))
    if len(bares) >= 4:
        run.say("engine/bare, paired rounds", ratio("engine/bare, paired rounds", bares, engines, target=GOAL))
        label = "engine with an event per step/bare"
        if per_step:
            run.say(f"{label}, paired rounds", ratio(f"{label}, paired rounds", bares, per_step))
        run.say("engine/bare, ratio of means", ratio("engine/bare, ratio of means", bares, engines, pairs=False))
        if per_step:
            run.say(f"{label}, ratio of means", ratio(f"{label}, ratio of means", bares, per_step, pairs=False))
            grouped = "engine (grouped)/engine with an event per step, ratio of means"
            run.say(grouped, ratio(grouped, per_step, engines, pairs=False))
    no_count = got.get("engine, no sync count")
    if no_count:
        nc = statistics.median(e / b for e, b in zip(no_count, bares, strict=True))
        run.say(
            "median engine (no sync counting)/bare",
            Figure("value", f"median engine (no sync counting)/bare: {nc:.3f}", nc),
        )


def engine_saw(run: Run, last: dict[str, object]) -> None:
    run.line(
        f"engine saw: syncs/step {last.get('syncs')}, syncs of its own bookkeeping "
        f"{last.get('bookkeeping_syncs')}, step p50 {last.get('p50')} ms, {last.get('samples')} samples"
    )


def interleaved(run: Run, pairs: list[Any], seconds: float) -> None:
    """The bursts in blocks (``engine_loops.BLOCK``), read by pairs, against the goal."""
    engine, bare = loops.block_rates(pairs)
    steps = sorted(p[0] for p in pairs)
    run.line()
    run.comment(
        f"interleaved: one engine run of {seconds:g} s, bare steps before each of its bursts; "
        f"{len(pairs)} bursts (median {steps[len(steps) // 2] if steps else 0} steps), "
        f"{len(engine)} blocks of {loops.BLOCK}"
    )
    if len(engine) < 4:
        run.line("(too few bursts for an interval: a longer interleave)")
        return
    run.values("bare, interleaved", bare, "steps/s")
    run.values("engine, interleaved", engine, "steps/s")
    label = "engine/bare, interleaved burst by burst"
    f = ratio(label, bare, engine, target=GOAL)
    engine_us = 1e6 * sum(p[1] for p in pairs) / sum(p[0] for p in pairs)
    bare_us = 1e6 * sum(p[3] for p in pairs) / sum(p[2] for p in pairs)
    f.text = f.text.replace(" (target", f" (step {bare_us:.1f} µs bare, {engine_us:.1f} µs in the engine; target")
    run.say(label, f)
