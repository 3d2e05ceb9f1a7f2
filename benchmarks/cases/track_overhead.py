"""What ``gpudash.track()`` costs a training loop: the same small-step loop with and without
``tracker.step()``.

The loop is a small MLP's training step (``shared.mlp``): a host-bound step of a fraction of a
millisecond on a GPU, where a per-step cost shows most. ABBA rounds time ``n`` steps (about
``seconds`` worth) in each arm between two synchronizes: *bare*, the loop alone (no tracker
exists), and *tracked*, the loop with ``tracker.step(samples=batch)`` after each step, the tracker
made (its NVML sampler opened, its writer thread started) and warmed up for ``warm`` seconds of
steps before the timing starts, closed after it stops. ``alternate_blocks`` then alternates single
steps with one tracker open (the host's drift taken out) and splits the writer thread's CPU time
into its time inside NVML's C calls (the GIL released) and the rest: a ceiling on what it takes
from the training thread. The goal: an overhead of at most 1%."""

from __future__ import annotations

import gc
import os
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks.cases.shared.mlp import MlpParams, mlp_train_step, torch_device
from benchmarks.cases.shared.thread_time import CollectionCount, NvmlCallTime
from benchmarks.harness.context import Run
from benchmarks.harness.params import param
from benchmarks.harness.result import Figure
from benchmarks.harness.schedule import Schedule, alternate_steps, rounds
from benchmarks.harness.stats import Target, ratio

GOAL = Target(0.99)  # tracked/bare: at most 1% slower
PAIRS = 50  # pairs of steps a block, alternated


@dataclass(frozen=True)
class Params(MlpParams):
    rounds: int = param(20, "ABBA rounds (0: the alternation only)")
    seconds: float = param(2.0, "seconds of steps per arm per round")
    interval: float = param(0.5, "the tracker's sample interval, seconds")
    warm: float = param(0.25, "tracked seconds before each timed stretch")
    alternate_blocks: int = param(0, f"also alternate single steps: N blocks of {PAIRS} pairs (4 or more)")


@dataclass
class Arms:
    """The two arms of a round, each timing ``n`` steps (steps/s): ``bare``, the loop alone (no
    tracker exists), and ``tracked``, the loop with ``tracker.step()`` (a fresh tracker each time)."""

    train_step: Callable[[], None]
    sync: Callable[[], None]
    p: Params
    collections: CollectionCount = field(default_factory=CollectionCount)
    tmp: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="track-overhead-")))
    files: list[Path] = field(default_factory=list)  # each tracker's file, in order
    issued: list[int] = field(default_factory=list)  # steps given to each tracker (its file must count them all)

    def timed(self, steps: Callable[[int], None], n: int, arm: str) -> float:
        """Steps/s of ``steps(n)`` between two synchronizes, after a ``gc.collect()`` (see
        CollectionCount), the collections inside it counted for ``arm``."""
        self.sync()
        gc.collect()
        t = time.perf_counter()
        with self.collections.during(arm):
            steps(n)
            self.sync()
        return n / (time.perf_counter() - t)

    def bare(self, n: int) -> float:
        train_step = self.train_step

        def steps(n: int) -> None:
            for _ in range(n):
                train_step()

        return self.timed(steps, n, "bare")

    def tracked(self, n: int) -> float:
        """A tracker made and warmed up past its start (its first rows: once per job, not per
        step), then ``n`` steps each followed by ``tracker.step()`` timed; the tracker closed."""
        import gpudash

        path = self.tmp / f"run{len(self.files)}.csv"
        self.files.append(path)
        tracker = gpudash.track(path, label="overhead", interval_s=self.p.interval, device=self.p.device)
        train_step, batch = self.train_step, self.p.batch
        warm_until, warm = time.perf_counter() + self.p.warm, 0
        while time.perf_counter() < warm_until:
            train_step()
            tracker.step(samples=batch)
            warm += 1
        self.issued.append(warm + n)

        def steps(n: int) -> None:
            for _ in range(n):
                train_step()
                tracker.step(samples=batch)

        rate = self.timed(steps, n, "tracked")
        tracker.close()
        return rate

    def remove(self) -> None:
        for f in self.tmp.iterdir():
            f.unlink()
        self.tmp.rmdir()


def measure(run: Run, p: Params) -> None:
    import torch

    device = torch_device(torch, p.device)
    cuda = device.type == "cuda"
    train_step = mlp_train_step(torch, device, p.hidden, p.batch)

    def sync() -> None:
        if cuda:
            torch.cuda.synchronize()

    arms = Arms(train_step, sync, p)
    arms.bare(20)  # warm up: the allocator, the kernels, lazy init
    arms.tracked(20)
    n = max(50, int(arms.bare(200) * p.seconds))
    run.comment(f"gpudash.track() overhead: MLP 64-{p.hidden}-10, batch {p.batch}, on {device}")
    run.comment(
        f"{n} steps per measurement, {p.rounds} rounds (ABBA), tracker interval {p.interval} s, "
        f"each round's tracker warmed up {p.warm:g} s"
    )
    if p.rounds:
        abba_rounds(run, arms, n)
    if p.alternate_blocks >= 4:
        alternate(run, p, train_step, sync, arms.tmp / "alternate.csv")
    last_file(run, arms.files[-1], arms.issued[-1])
    arms.remove()


def abba_rounds(run: Run, arms: Arms, n: int) -> None:
    """The ABBA rounds, a row each, then the paired ratio and the ratio of the means."""
    table = run.table(["round", "bare steps/s", "tracked steps/s", "tracked/bare"])

    def row(i: int, got: dict[str, float]) -> None:
        run.row(table, i + 1, f"{got['bare']:.1f}", f"{got['tracked']:.1f}", f"{got['tracked'] / got['bare']:.4f}")

    got = rounds(
        {"bare": lambda: arms.bare(n), "tracked": lambda: arms.tracked(n)}, run.params.rounds, Schedule.ABBA, each=row
    )
    bares, trackeds = got["bare"], got["tracked"]
    run.values("bare", bares, "steps/s")
    run.values("tracked", trackeds, "steps/s")
    run.line()
    median = statistics.median(t / b for t, b in zip(trackeds, bares, strict=True))
    run.say("median tracked/bare", Figure("value", f"median tracked/bare: {median:.4f}", median))
    if len(bares) < 4:
        run.line("(4 rounds or more for an interval)")
        return
    run.say("tracked/bare, paired rounds", ratio("tracked/bare, paired rounds", bares, trackeds, target=GOAL))
    run.say("tracked/bare, ratio of means", ratio("tracked/bare, ratio of means", bares, trackeds, pairs=False))
    run.line(f"cyclic collections inside the timed stretches: {arms.collections.summary()}")


def alternate(run: Run, p: Params, train_step: Callable[[], None], sync: Callable[[], None], path: Path) -> None:
    """The tracker's cost with the host's drift taken out: one tracker open, single steps tracked
    and not alternated (``alternate_steps``); the writer thread's CPU share over the wall clock is
    what the per-step comparison cannot see (all the training thread could lose to it: a ceiling)."""
    import gpudash

    tracker = gpudash.track(path, label="alternate", interval_s=p.interval, device=p.device)
    writer = next(t for t in threading.enumerate() if t.name == "gpudash-track")
    warm_until = time.perf_counter() + p.warm
    while time.perf_counter() < warm_until:
        train_step()
        tracker.step(samples=p.batch)
    sync()

    def tracked_step() -> None:
        train_step()
        tracker.step(samples=p.batch)

    assert writer.ident is not None  # a started thread
    cpu_clock = time.pthread_getcpuclockid(writer.ident)
    with NvmlCallTime(writer) as in_nvml:
        cpu0, wall0 = time.clock_gettime(cpu_clock), time.perf_counter()
        got = alternate_steps(train_step, tracked_step, p.alternate_blocks, PAIRS)
        sync()
        wall, cpu = time.perf_counter() - wall0, time.clock_gettime(cpu_clock) - cpu0
    tracker.close()
    steps = p.alternate_blocks * PAIRS
    run.line()
    run.comment(
        f"steps alternated one by one: {p.alternate_blocks} blocks of {PAIRS} pairs, "
        f"step {1000 * got.other_s / steps:.3f} ms tracked"
    )
    run.values("bare, alternated", got.bare_rates, "steps/s")
    run.values("tracked, alternated", got.other_rates, "steps/s")
    label = "tracked/bare, by steps alternated"
    f = ratio(label, got.bare_rates, got.other_rates)
    f.text += f" ({1e6 * (got.other_s - got.bare_s) / steps:+.2f} µs a step)"
    run.say(label, f)
    ceilings(run, f, cpu / wall, max(0.0, cpu - in_nvml.seconds) / wall)


def ceilings(run: Run, f: Figure, share: float, gil_share: float) -> None:
    """The writer thread's CPU share, and the cost's ceiling with it counted against the loop."""
    run.line(
        f"the writer thread's CPU time: {100 * share:.3f}% of the wall clock, {100 * (share - gil_share):.3f}% "
        f"of it inside NVML's C calls (ctypes releases the GIL there; {os.cpu_count()} cores), "
        f"{100 * gil_share:.3f}% holding the GIL (a ceiling on what it takes from the training thread)"
    )
    assert f.low is not None  # 4 blocks or more
    for what, taken in (("holding the GIL", gil_share), ("all of it", share)):
        low = f.low * (1 - taken)
        met = "met" if low >= GOAL.bound else "not met"
        text = (
            f"together, the cost's ceiling with the writer's CPU time {what}: tracked/bare ≥ {low:.4f} "
            f"(target {GOAL.text}: {met})"
        )
        run.say(f"ceiling, {what}", Figure("value", text, low, target=GOAL.text, met=met))


def last_file(run: Run, path: Path, issued: int) -> None:
    """What the last tracker's file counted (against the ``issued`` steps) and its step time."""
    from gpudash.core.protocol import Sample
    from gpudash.recording.replay import ReplaySource, read_all

    samples = [m for m in read_all(ReplaySource(path)) if isinstance(m, Sample)]
    if samples:
        s = samples[-1]
        run.line(
            f"the last tracked file: {s.steps} steps counted of {issued} issued, step p50 {s.step_ms_p50} ms, "
            f"{len(samples)} samples"
        )
        if s.steps != issued:
            run.failed = f"the tracked file counted {s.steps} steps of {issued}"
