"""Engine overhead: steps/s of one workload in a bare loop vs in the engine's step loop, one run.

    python benchmarks/engine_overhead.py                          # encdec serial on cuda
    python benchmarks/engine_overhead.py -w sync_loss -v fixed --seconds 5 --rounds 5
    python benchmarks/engine_overhead.py -w examples/mine.py:workload --hand --rounds 10   # your own model

The workload is built once. Each round runs the same number of steps (about ``--seconds``
worth) twice, the order alternating from round to round:
  * bare:   ``for _ in range(n): workload.step()`` then one synchronize;
  * engine: ``gpudash.engine.loop.StepLoop`` (what the child runs; one loop, built before the
    first round, runs ``n`` more steps each round): CUDA-event timing read back by query(), loss
    copies, sync counting with set_sync_debug_mode("warn"), samples every --sample-interval s,
    control checks; it ends with the same drain.
and, with --no-sync-count as a third column, the engine without sync counting; with
--per-step-events, the engine with a timing event after every step (no groups). With ``--hand``
(a workload of your own, ``gpudash.api``) the bare loop is the step written by hand from the
``Training`` gpudash was given (copy the batch, zero_grad, loss, backward, step): what the user's
own loop would do. Prints a table, the median ratio engine/bare, and two 95% intervals with their
verdicts: the paired one (``compare_paired``: the geometric mean of each round's engine/bare, a t
interval over their logs; a drift of the host that moves both halves of a round cancels), which
decides the target (>= 0.98: met when the interval's low end is at 0.98 or above), and the ratio
of the means over all rounds. On a noisy host many short rounds (``--rounds 300 --seconds 0.1``)
pair more closely than a few long ones.

``--interleave SECONDS`` (with ``--rounds 0``: only it) pairs closer still, and measures the
engine as a run spends nearly all its time, in its steady state: one engine loop runs that long,
and before each of its bursts (a timing group, ~25 ms of fast steps) the same number of bare
steps runs, timed on the host clock; the burst's time runs to the start of the next burst, so the
loop's bookkeeping is in it. Adjacent bursts see the same host, so its drift (±10% between 0.15 s
windows on a cloud H100's host) cancels; a run's start and end (the drain, the last sample), once
per run in the product but once per round above, are in neither.
"""

from __future__ import annotations

import argparse
import datetime as dt
import platform
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

if TYPE_CHECKING:
    from gpudash.engine.loop import StepLoop
    from workloads.base import Workload
    from workloads.user import UserWorkload

TARGET = 0.98  # engine/bare: the interval's low end at or above this
BLOCK = 20  # bursts per block of the interleaved measurement (~1 s of 25 ms bursts)


def parse_args() -> argparse.Namespace:
    """The command line (see the module's docstring)."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-w", "--workload", default="encdec")
    p.add_argument("-v", "--variant", default="serial")
    p.add_argument("-b", "--batch-size", type=int)
    p.add_argument("--device", default="cuda")
    p.add_argument("--seconds", type=float, default=5.0, help="per measurement (default: 5)")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--sample-interval", type=float, default=0.25)
    p.add_argument("--no-sync-count", action="store_true", help="also time the engine without sync counting")
    p.add_argument(
        "--per-step-events",
        action="store_true",
        help="also time the engine with a CUDA event after every step (no groups: measure.CudaStepTimer)",
    )
    p.add_argument("--hand", action="store_true", help="bare: the Training's step by hand (a workload of your own)")
    p.add_argument(
        "--knob",
        action="append",
        default=[],
        metavar="NAME[=VALUE]",
        help="build the workload with this knob (repeatable); --hand applies it as a hand loop would "
        "(the same compiled modules, inputs in the knobs' layout, forward and loss under the knobs' autocast)",
    )
    p.add_argument(
        "--resident",
        type=int,
        default=0,
        metavar="N",
        help="--hand: the bare loop trains on N batches kept on the device, copied there once "
        "(synthetic data on the GPU: no copy in the step)",
    )
    p.add_argument(
        "--interleave",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="also run one engine loop this long with the bare steps interleaved burst by burst (see above)",
    )
    return p.parse_args()


def main() -> int:
    args = parse_args()

    import torch

    from workloads.user import UserWorkload

    w, device = build_workload(args)
    cuda = device.type == "cuda"
    user = w if isinstance(w, UserWorkload) and w.pool is not None else None
    if args.hand and user is None:
        print("engine_overhead.py: --hand needs your own workload with a batch() function", file=sys.stderr)
        return 2
    # the bare loop this run compares with
    bare_steps = hand_loop(user, args.resident, torch) if args.hand and user is not None else workload_loop(w)

    def sync() -> None:
        if cuda:
            torch.cuda.synchronize()

    def baseline(n: int) -> float:
        return steps_per_s(bare_steps, n, sync)

    engine = EngineRuns(w, args.sample_interval, cuda, sync)
    # warm up (allocator, cuDNN, lazy init), then size n to about --seconds
    baseline(10)
    engine(10, True)
    probe = baseline(max(10, 50))
    n = max(20, int(probe * args.seconds))

    print_header(args, w, device, resident=args.hand and args.resident > 0)
    rounds = run_rounds(args, n, baseline, engine)
    print_summary(rounds, engine.last)
    if args.interleave > 0:
        interleave(loop_for_interleaving(w, args, cuda), bare_steps, sync, args.interleave)
    w.close()
    return 0


def build_workload(args: argparse.Namespace) -> tuple[Workload, Any]:
    """The workload named on the command line (its variant, batch size and knobs) and the
    ``torch.device`` it was built on, made the current GPU where ``--device`` names one."""
    import torch

    from workloads.base import WorkloadOptions
    from workloads.factory import build
    from workloads.knobs import parse_knobs

    device = torch.device(args.device)
    if device.type == "cuda" and device.index is not None:
        torch.cuda.set_device(device)
    knobs = parse_knobs(",".join(args.knob) or "none")
    options = WorkloadOptions(variant=args.variant, batch_size=args.batch_size, knobs=knobs)
    return build(args.workload, device, options), device


def workload_loop(w: Workload) -> Callable[[int], None]:
    """The bare loop: ``workload.step()`` ``n`` times."""

    def workload_steps(n: int) -> None:
        for _ in range(n):
            w.step()

    return workload_steps


def hand_loop(w: UserWorkload, resident: int, torch: Any) -> Callable[[int], None]:
    """The bare loop of ``--hand``: the user's step as their own loop would take it, from the same
    Training and batches (the workload's modules as its knobs resolved them: compiled, in their
    layout); with ``resident`` > 0, on that many batches copied to the device once, here."""
    pool = w.pool
    assert pool is not None  # checked by main, for --hand
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


def print_header(args: argparse.Namespace, w: Workload, device: Any, resident: bool) -> None:
    """The run's header lines: the workload, the bare loop, the machine and the versions."""
    import torch

    cuda = device.type == "cuda"
    name = torch.cuda.get_device_name(device) if cuda else platform.processor() or "cpu"
    print(
        f"# engine overhead: {args.workload} {w.variant}, batch {w.batch_size}, image {w.image_size}, "
        f"knobs {w.knobs.text()}, bare loop {'by hand' if args.hand else 'workload.step()'}"
        f"{f' on {args.resident} batches kept on the device' if resident else ''}, "
        f"on {device} ({name})"
    )
    print(
        f"# torch {torch.__version__}, CUDA {torch.version.cuda}, python {platform.python_version()}, "
        f"{dt.datetime.now().astimezone().isoformat(timespec='seconds')}"
    )


@dataclass
class Rounds:
    """The rounds' measurements: steps/s bare, in the engine and with an event per step, and the
    ratios engine/bare with and without sync counting."""

    bares: list[float] = field(default_factory=list)
    engines: list[float] = field(default_factory=list)
    per_step: list[float] = field(default_factory=list)
    ratios: list[float] = field(default_factory=list)
    ratios_nc: list[float] = field(default_factory=list)


def run_rounds(args: argparse.Namespace, n: int, baseline: Callable[[int], float], engine: EngineRuns) -> Rounds:
    """``args.rounds`` rounds of ``n`` steps bare and in the engine (and the optional columns),
    the order alternating; a table row printed for each."""
    cols = ["round", "bare steps/s", "engine steps/s", "ratio"]
    if args.no_sync_count:
        cols += ["engine, no sync count", "ratio"]
    if args.per_step_events:
        cols += ["engine, event per step", "ratio"]
    if args.rounds:
        print(f"# {n} steps per measurement, {args.rounds} rounds, sample interval {args.sample_interval} s")
        print("| " + " | ".join(cols) + " |")
        print("|" + "---|" * len(cols))
    got = Rounds()
    for r in range(1, args.rounds + 1):
        if r % 2:  # ABBA: which runs first alternates, so a drift (clocks, heat) favours neither
            b = baseline(n)
            e = engine(n, True)
        else:
            e = engine(n, True)
            b = baseline(n)
        got.bares.append(b)
        got.engines.append(e)
        row = [str(r), f"{b:.1f}", f"{e:.1f}", f"{e / b:.3f}"]
        got.ratios.append(e / b)
        if args.no_sync_count:
            e2 = engine(n, False)
            got.ratios_nc.append(e2 / b)
            row += [f"{e2:.1f}", f"{e2 / b:.3f}"]
        if args.per_step_events:
            e3 = engine(n, True, grouped=False)
            got.per_step.append(e3)
            row += [f"{e3:.1f}", f"{e3 / b:.3f}"]
        print("| " + " | ".join(row) + " |", flush=True)
    return got


def print_summary(rounds: Rounds, last: dict[str, object]) -> None:
    """The median ratio, the intervals (4 rounds or more), and what the engine's samples saw."""
    if rounds.ratios:
        med = statistics.median(rounds.ratios)
        print(f"\nmedian engine/bare: {med:.3f}  (target >= {TARGET}: {'OK' if med >= TARGET else 'BELOW'})")
    if len(rounds.bares) >= 4:
        print_intervals(rounds.bares, rounds.engines, rounds.per_step)
    if rounds.ratios_nc:
        print(f"median engine (no sync counting)/bare: {statistics.median(rounds.ratios_nc):.3f}")
    print(
        f"engine saw: syncs/step {last.get('syncs')}, syncs of its own bookkeeping "
        f"{last.get('bookkeeping_syncs')}, step p50 {last.get('p50')} ms, {last.get('samples')} samples"
    )


def print_intervals(bares: list[float], engines: list[float], per_step: list[float]) -> None:
    """The 95% intervals with their verdicts: paired rounds (against the target) and ratio of means."""
    from gpudash.stats.comparison import compare, compare_paired, estimate_from_batches
    from gpudash.stats.fmt import fmt_ratio

    c = compare_paired(bares, engines)
    met = "met" if c.low is not None and c.low >= TARGET else "not met"
    print(f"engine/bare, paired rounds: {fmt_ratio(c)}, {c.verdict} (target >= {TARGET}: {met})")
    if per_step:
        c = compare_paired(bares, per_step)
        print(f"engine with an event per step/bare, paired rounds: {fmt_ratio(c)}, {c.verdict}")
    c = compare(estimate_from_batches(bares), estimate_from_batches(engines))
    print(f"engine/bare, ratio of means: {fmt_ratio(c)}, {c.verdict}")
    if per_step:
        c = compare(estimate_from_batches(bares), estimate_from_batches(per_step))
        print(f"engine with an event per step/bare, ratio of means: {fmt_ratio(c)}, {c.verdict}")
        c = compare(estimate_from_batches(per_step), estimate_from_batches(engines))
        print(f"engine (grouped)/engine with an event per step, ratio of means: {fmt_ratio(c)}, {c.verdict}")


def engine_loop(w: Any, sample_interval_s: float, count_syncs: bool, emit: Any) -> Any:
    """The engine's step loop over ``w`` as the child builds it (samples, controls asked for)."""
    from gpudash.engine.loop import StepLoop

    return StepLoop(
        w, emit=emit, sample_interval_s=sample_interval_s, count_syncs=count_syncs, controls=lambda timeout: None
    )


def loop_for_interleaving(w: Any, args: Any, cuda: bool) -> Any:
    """The engine's loop for ``interleave``: sync counting on a GPU, as in the rounds."""
    from gpudash.engine.measure import CudaStepTimer

    loop = engine_loop(w, args.sample_interval, cuda, lambda message: None)
    if isinstance(loop.timer, CudaStepTimer):
        # A group's events span the bare steps run between its bursts too, so its measured step
        # time is about twice the engine's: twice the group time keeps the bursts at their size.
        loop.timer.group_ms *= 2
    return loop


def interleave(loop: Any, bare_steps: Any, sync: Any, seconds: float) -> None:
    """The engine in its steady state against bare steps, alternated burst by burst in one run.

    The engine loop runs for ``seconds``; at the start of each of its bursts (``timer.begin``)
    the same number of bare steps runs first, timed on the host clock. A burst's engine time is
    from the end of those bare steps to the start of the next burst: its steps, the loop's
    bookkeeping and everything else the loop does between bursts. On a launch-bound step the
    GPU keeps up, so host time is step time. Bursts are read in blocks of ``BLOCK`` pairs (engine
    steps/s over bare steps/s), the blocks give a paired interval: the host's drift, which moves
    adjacent 25 ms bursts alike, cancels; the start and the end of a run (once per run in the
    product) are in neither."""
    from gpudash.stats.comparison import compare_paired
    from gpudash.stats.fmt import fmt_ratio

    timer = loop.timer
    begin = timer.begin
    clock = time.perf_counter
    pairs: list[tuple[int, float, int, float]] = []  # (engine steps, engine s, bare steps, bare s)
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
    blocks = [pairs[i : i + BLOCK] for i in range(0, len(pairs) - BLOCK + 1, BLOCK)]
    engine = [sum(p[0] for p in b) / sum(p[1] for p in b) for b in blocks]
    bare = [sum(p[2] for p in b) / sum(p[3] for p in b) for b in blocks]
    steps = sorted(p[0] for p in pairs)
    print(
        f"\n# interleaved: one engine run of {seconds:g} s, bare steps before each of its bursts; "
        f"{len(pairs)} bursts (median {steps[len(steps) // 2] if steps else 0} steps), {len(blocks)} blocks of {BLOCK}"
    )
    if len(blocks) < 4:
        print("(too few bursts for an interval: a longer --interleave)")
        return
    c = compare_paired(bare, engine)
    met = "met" if c.low is not None and c.low >= TARGET else "not met"
    engine_us = 1e6 * sum(p[1] for p in pairs) / sum(p[0] for p in pairs)
    bare_us = 1e6 * sum(p[3] for p in pairs) / sum(p[2] for p in pairs)
    print(
        f"engine/bare, interleaved burst by burst: {fmt_ratio(c)}, {c.verdict} "
        f"(step {bare_us:.1f} µs bare, {engine_us:.1f} µs in the engine; target >= {TARGET}: {met})"
    )


if __name__ == "__main__":
    sys.exit(main())
