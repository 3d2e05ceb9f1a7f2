"""What ``gpudash.track()`` costs a training loop: the same small-step loop with and without
``tracker.step()``, interleaved.

    python benchmarks/track_overhead.py                               # cuda, 20 rounds of ~2 s each side
    python benchmarks/track_overhead.py --device cpu --rounds 4 --seconds 0.5    # a quick check anywhere
    python benchmarks/track_overhead.py --hidden 4096 --batch 256      # a larger step

The loop is a small MLP's training step (random inputs made on the device, forward, backward,
SGD): a host-bound step of a fraction of a millisecond on a GPU, where a per-step cost shows
most. Each round times ``n`` steps (about ``--seconds`` worth) twice, the order alternating
(ABBA), each between two synchronizes:
  * bare:    the loop alone (no tracker exists);
  * tracked: the loop with ``tracker.step(samples=batch)`` after each step, the tracker made
    (its NVML sampler opened, its writer thread started) and warmed up for WARM_S of steps
    before the timing starts (its start-up rows written: once per job, not per step), closed
    after it stops.
Prints a row per round, the median ratio tracked/bare, the paired ratio (``compare_paired``: the
geometric mean of each round's tracked/bare with a t interval over their logs, so a drift of the
host shared by a round's two halves cancels) and the ratio of the means of steps/s, each with its
95% interval and verdict (``gpudash.stats.comparison``). The target is an overhead of at most 1%:
the paired interval's low end at 0.99 or above. The tracked
files go to a temp dir (removed); the last one's step-count check and step time are printed.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import gc
import os
import platform
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import host_call_cost  # noqa: E402 - after the path insert

TARGET = 0.99  # tracked/bare: at most 1% slower
WARM_S = 0.25  # steps with the tracker before each timed stretch: its start-up (a few writer polls) done


def parse_args() -> argparse.Namespace:
    """The command line (see the module's docstring)."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", default="cuda")
    p.add_argument("--rounds", type=int, default=20, help="A/B rounds (default: 20)")
    p.add_argument("--seconds", type=float, default=2.0, help="per measurement (default: 2)")
    p.add_argument("--hidden", type=int, default=256, help="the MLP's hidden width (default: 256)")
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--interval", type=float, default=0.5, help="the tracker's sample interval (default: 0.5 s)")
    p.add_argument(
        "--warm", type=float, default=WARM_S, help=f"tracked seconds before each timed stretch (default: {WARM_S})"
    )
    p.add_argument(
        "--alternate-blocks",
        type=int,
        default=0,
        help=f"also time steps alternated one by one, N blocks of {host_call_cost.PAIRS} pairs (default: 0)",
    )
    return p.parse_args()


def main() -> int:
    args = parse_args()

    import torch

    import gpudash

    device = torch.device(args.device)
    cuda = device.type == "cuda"
    if cuda and device.index is not None:
        torch.cuda.set_device(device)
    train_step = host_call_cost.mlp_train_step(torch, device, args.hidden, args.batch)

    def sync() -> None:
        if cuda:
            torch.cuda.synchronize()

    arms = Arms(train_step, sync, batch=args.batch, interval_s=args.interval, warm_s=args.warm, device=str(device))
    arms.bare(20)  # warm up: the allocator, the kernels, lazy init
    arms.tracked(20)
    n = max(50, int(arms.bare(200) * args.seconds))

    print_header(args, device, n)
    bares, trackeds = run_rounds(arms, args.rounds, n)
    print_summary(bares, trackeds, args.rounds, arms.collections)
    if args.alternate_blocks >= 4:
        alternate(args.alternate_blocks, train_step, sync, arms.tmp / "alternate.csv", args, gpudash, torch)
    print_last_file(arms.files[-1], arms.issued[-1])
    arms.remove()
    return 0


@dataclass
class Arms:
    """The two arms of a round, each timing ``n`` steps (steps/s): ``bare``, the loop alone (no
    tracker exists), and ``tracked``, the loop with ``tracker.step()`` (a fresh tracker each
    time, its file in ``tmp``)."""

    train_step: Callable[[], None]
    sync: Callable[[], None]
    batch: int
    interval_s: float
    warm_s: float
    device: str
    collections: CollectionCount = field(default_factory=lambda: CollectionCount())
    tmp: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="track-overhead-")))
    files: list[Path] = field(default_factory=list)  # each tracker's file, in order
    issued: list[int] = field(default_factory=list)  # steps given to each tracker (its file must count them all)

    def timed(self, run: Callable[[int], None], n: int, arm: str) -> float:
        """Steps/s of ``run(n)`` between two synchronizes, started after a ``gc.collect()`` (see
        CollectionCount), the collections inside it counted for ``arm``."""
        self.sync()
        gc.collect()  # see CollectionCount
        t = time.perf_counter()
        with self.collections.during(arm):
            run(n)
            self.sync()
        return n / (time.perf_counter() - t)

    def bare(self, n: int) -> float:
        """Steps/s of ``n`` steps alone."""
        train_step = self.train_step

        def run(n: int) -> None:
            for _ in range(n):
                train_step()

        return self.timed(run, n, "bare")

    def tracked(self, n: int) -> float:
        """Steps/s of ``n`` steps each followed by ``tracker.step()``: a tracker made and warmed
        up for ``warm_s`` before the timing starts, closed after it stops."""
        import gpudash

        path = self.tmp / f"run{len(self.files)}.csv"
        self.files.append(path)
        tracker = gpudash.track(path, label="overhead", interval_s=self.interval_s, device=self.device)
        train_step, batch = self.train_step, self.batch
        # Warm up past the tracker's start (its thread's first collect writes the started row and
        # the metadata file): a job pays that once, not per step. Then the steady state is timed.
        warm_until, warm = time.perf_counter() + self.warm_s, 0
        while time.perf_counter() < warm_until:
            train_step()
            tracker.step(samples=batch)
            warm += 1
        self.issued.append(warm + n)

        def run(n: int) -> None:
            for _ in range(n):
                train_step()
                tracker.step(samples=batch)

        rate = self.timed(run, n, "tracked")
        tracker.close()
        return rate

    def remove(self) -> None:
        """Remove the trackers' temp dir and its files."""
        for f in self.tmp.iterdir():
            f.unlink()
        self.tmp.rmdir()


def print_header(args: argparse.Namespace, device: Any, n: int) -> None:
    """The run's header lines: the MLP, the machine, the versions and the design."""
    import torch

    cuda = device.type == "cuda"
    name = torch.cuda.get_device_name(device) if cuda else platform.processor() or "cpu"
    print(f"# gpudash.track() overhead: MLP 64-{args.hidden}-10, batch {args.batch}, on {device} ({name})")
    print(
        f"# torch {torch.__version__}, CUDA {torch.version.cuda}, python {platform.python_version()}, "
        f"{dt.datetime.now().astimezone().isoformat(timespec='seconds')}"
    )
    print(
        f"# {n} steps per measurement, {args.rounds} rounds (ABBA), tracker interval {args.interval} s, "
        f"each round's tracker warmed up {args.warm:g} s"
    )


def run_rounds(arms: Arms, rounds: int, n: int) -> tuple[list[float], list[float]]:
    """``rounds`` rounds of ``n`` steps bare and tracked, the order alternating (ABBA), a table
    row printed for each: (bare steps/s, tracked steps/s), a value a round."""
    if rounds:
        print("| round | bare steps/s | tracked steps/s | tracked/bare |")
        print("|---|---|---|---|")
    bares: list[float] = []
    trackeds: list[float] = []
    for r in range(1, rounds + 1):
        if r % 2:  # which runs first alternates, so a drift (clocks, heat) favours neither
            b, t = arms.bare(n), arms.tracked(n)
        else:
            t, b = arms.tracked(n), arms.bare(n)
        bares.append(b)
        trackeds.append(t)
        print(f"| {r} | {b:.1f} | {t:.1f} | {t / b:.4f} |", flush=True)
    return bares, trackeds


def print_summary(bares: list[float], trackeds: list[float], rounds: int, collections: CollectionCount) -> None:
    """The median ratio tracked/bare and, with 4 rounds or more, the intervals and the verdict."""
    from gpudash.stats.comparison import compare, compare_paired, estimate_from_batches
    from gpudash.stats.fmt import fmt_ratio

    if bares:
        med = statistics.median(t / b for t, b in zip(trackeds, bares, strict=True))
        print(f"\nmedian tracked/bare: {med:.4f}")
    if len(bares) >= 4:
        c = compare_paired(bares, trackeds)
        ok = c.low is not None and c.low >= TARGET
        print(f"tracked/bare, paired rounds: {fmt_ratio(c)}, {c.verdict}")
        c = compare(estimate_from_batches(bares), estimate_from_batches(trackeds))
        print(f"tracked/bare, ratio of means: {fmt_ratio(c)}, {c.verdict}")
        print(f"overhead at most {100 * (1 - TARGET):.0f}% (interval's low end ≥ {TARGET}): {'yes' if ok else 'NO'}")
        print(f"cyclic collections inside the timed stretches: {collections.summary()}")
    elif rounds:
        print("(4 rounds or more for an interval)")


def print_last_file(path: Path, issued: int) -> None:
    """What the last tracker's file counted (against the ``issued`` steps) and its step time."""
    from gpudash.core.protocol import Sample
    from gpudash.recording.replay import ReplaySource, read_all

    samples = [m for m in read_all(ReplaySource(path)) if isinstance(m, Sample)]
    if samples:
        s = samples[-1]
        print(
            f"the last tracked file: {s.steps} steps counted of {issued} issued, step p50 {s.step_ms_p50} ms, "
            f"{len(samples)} samples"
        )


def alternate(blocks: int, train_step: Any, sync: Any, path: Path, args: Any, gpudash: Any, torch: Any) -> None:
    """The tracker's cost with the host's drift taken out: one tracker open, steps alternated one
    by one (tracked, then not, the order flipping each pair), each timed on the host clock, which
    on a launch-bound step is the step's time (the GPU keeps up; nothing waits for it). A block's
    ratio is the sum of its bare steps' times over its tracked steps'; the blocks' ratios give a
    paired interval. What the per-step comparison cannot see, the writer thread's share, is its
    CPU time over the wall clock (all the training thread could lose to it: a ceiling)."""

    from gpudash.stats.comparison import compare_paired
    from gpudash.stats.fmt import fmt_ratio

    tracker = gpudash.track(path, label="alternate", interval_s=args.interval, device=args.device)
    writer = next(t for t in threading.enumerate() if t.name == "gpudash-track")
    clock = time.perf_counter
    warm_until = clock() + args.warm
    while clock() < warm_until:
        train_step()
        tracker.step(samples=args.batch)
    sync()
    cpu_clock = time.pthread_getcpuclockid(writer.ident)  # type: ignore[arg-type]  # a started thread
    with NvmlCallTime(writer) as in_nvml:
        cpu0, wall0 = time.clock_gettime(cpu_clock), clock()
        bare_rates, tracked_rates, bare_s, tracked_s = host_call_cost.alternate(
            train_step, lambda: tracker.step(samples=args.batch), blocks, host_call_cost.PAIRS
        )
        sync()
        wall = clock() - wall0
        cpu = time.clock_gettime(cpu_clock) - cpu0
        nvml_cpu = in_nvml.seconds
    tracker.close()
    c = compare_paired(bare_rates, tracked_rates)
    per_step_us = (tracked_s - bare_s) / (blocks * host_call_cost.PAIRS)
    print(
        f"\n# steps alternated one by one: {blocks} blocks of {host_call_cost.PAIRS} pairs, "
        f"step {1000 * tracked_s / (blocks * host_call_cost.PAIRS):.3f} ms tracked"
    )
    print(f"tracked/bare, by steps alternated: {fmt_ratio(c)}, {c.verdict} ({1e6 * per_step_us:+.2f} µs a step)")
    share, gil_share = cpu / wall, max(0.0, cpu - nvml_cpu) / wall
    print(
        f"the writer thread's CPU time: {100 * share:.3f}% of the wall clock, {100 * (share - gil_share):.3f}% "
        f"of it inside NVML's C calls (ctypes releases the GIL there; {os.cpu_count()} cores), "
        f"{100 * gil_share:.3f}% holding the GIL (a ceiling on what it takes from the training thread)"
    )
    assert c.low is not None  # 4 blocks or more
    for what, taken in (("holding the GIL", gil_share), ("all of it", share)):
        low = c.low * (1 - taken)
        print(
            f"together, the cost's ceiling with the writer's CPU time {what}: tracked/bare ≥ {low:.4f} "
            f"(overhead at most {100 * (1 - TARGET):.0f}%: {'yes' if low >= TARGET else 'NO'})"
        )


class CollectionCount:
    """CPython's cyclic collections (by generation) that run inside the timed stretches, by arm.

    A round of the ABBA design makes and closes a tracker (threads, files, NVML): what that
    allocates brings the collector's next full collection closer, and one landing in a 0.1 s
    stretch costs it tens of ms. A job makes one tracker, so each stretch starts after a
    ``gc.collect()``, and this says how many collections still landed in each arm."""

    def __init__(self) -> None:
        self.arm: str | None = None
        self.counts: dict[str, list[int]] = {"bare": [0, 0, 0], "tracked": [0, 0, 0]}
        gc.callbacks.append(self._seen)

    @contextlib.contextmanager
    def during(self, arm: str) -> Iterator[None]:
        self.arm = arm
        try:
            yield
        finally:
            self.arm = None

    def _seen(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start" and self.arm is not None:
            self.counts[self.arm][info["generation"]] += 1

    def summary(self) -> str:
        return "; ".join(
            f"{arm} " + ", ".join(f"gen{g} {n}" for g, n in enumerate(counts)) for arm, counts in self.counts.items()
        )


class NvmlCallTime:
    """The CPU time one thread spends inside NVML's C functions, while the block runs.

    pynvml calls the library through ``ctypes.CDLL``, which releases the GIL for the call: a
    thread in there takes nothing from the training thread but a core (of many). Each function
    pointer pynvml has looked up (its cache) is wrapped for the block; the wrapper's own Python
    counts outside, on the side of the GIL (a ceiling stays a ceiling)."""

    def __init__(self, thread: Any) -> None:
        self.thread = thread
        self.seconds = 0.0
        self._saved: tuple[Any, dict[str, Any]] | None = None

    def __enter__(self) -> NvmlCallTime:
        try:
            import pynvml
        except ImportError:
            return self
        cache: dict[str, Any] = pynvml._nvmlGetFunctionPointer_cache  # noqa: SLF001 - instrumenting
        lookup = pynvml._nvmlGetFunctionPointer  # noqa: SLF001
        self._saved = (lookup, dict(cache))
        for name, fn in cache.items():
            cache[name] = _TimedCall(fn, self)

        def timed_lookup(name: str) -> Any:
            fn = lookup(name)
            if name in cache and cache[name] is fn and not getattr(fn, "_gpudash_timed", False):
                cache[name] = fn = _TimedCall(fn, self)
            return fn

        pynvml._nvmlGetFunctionPointer = timed_lookup  # noqa: SLF001
        return self

    def __exit__(self, *exc: object) -> None:
        if self._saved is not None:
            import pynvml

            lookup, cache = self._saved
            pynvml._nvmlGetFunctionPointer = lookup  # noqa: SLF001
            pynvml._nvmlGetFunctionPointer_cache.clear()  # noqa: SLF001
            pynvml._nvmlGetFunctionPointer_cache.update(cache)  # noqa: SLF001


class _TimedCall:
    """A ctypes function that adds its CPU time in one thread to ``owner.seconds``; attributes
    (``restype``: pynvml sets one) go to the function itself."""

    _gpudash_timed = True

    def __init__(self, fn: Any, owner: NvmlCallTime) -> None:
        object.__setattr__(self, "_fn", fn)
        object.__setattr__(self, "_owner", owner)

    def __call__(self, *args: Any) -> Any:
        owner = self._owner
        if threading.current_thread() is not owner.thread:
            return self._fn(*args)
        t = time.thread_time()
        try:
            return self._fn(*args)
        finally:
            owner.seconds += time.thread_time() - t

    def __getattr__(self, name: str) -> Any:
        return getattr(self._fn, name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._fn, name, value)


if __name__ == "__main__":
    sys.exit(main())
