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
"""

from __future__ import annotations

import argparse
import datetime as dt
import platform
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> int:
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
    args = p.parse_args()

    import torch

    from gpudash.core.protocol import Sample
    from gpudash.engine.loop import StepLoop
    from gpudash.engine.measure import CudaStepTimer
    from workloads.base import WorkloadOptions
    from workloads.factory import build

    device = torch.device(args.device)
    cuda = device.type == "cuda"
    if cuda and device.index is not None:
        torch.cuda.set_device(device)
    w = build(args.workload, device, WorkloadOptions(variant=args.variant, batch_size=args.batch_size))

    def sync() -> None:
        if cuda:
            torch.cuda.synchronize()

    def bare(n: int) -> float:
        sync()
        t = time.perf_counter()
        for _ in range(n):
            w.step()
        sync()
        return n / (time.perf_counter() - t)

    def by_hand(n: int) -> float:
        """The user's step as their own loop would take it, from the same Training and batches."""
        model, loss_fn, optimizer, pool, frozen = w.model, w.loss_fn, w.optimizer, w.pool, w.frozen
        sync()
        t = time.perf_counter()
        for _ in range(n):
            x, y = (v.to(device, non_blocking=True) for v in pool.next())
            if frozen is not None:
                with torch.no_grad():
                    x = frozen(x)
            optimizer.zero_grad(set_to_none=True)
            loss_fn(model(x), y).backward()
            optimizer.step()
        sync()
        return n / (time.perf_counter() - t)

    baseline = by_hand if args.hand else bare  # the bare loop this run compares with

    last: dict[str, object] = {}

    loops: dict[tuple[bool, bool], tuple[StepLoop, list[object]]] = {}

    def engine(n: int, count_syncs: bool, grouped: bool = True) -> float:
        """``n`` more steps of one StepLoop per setting, built once (as the child builds one)."""
        if (count_syncs, grouped) not in loops:
            emitted: list[object] = []
            loop = StepLoop(
                w,
                emit=emitted.append,
                sample_interval_s=args.sample_interval,
                count_syncs=count_syncs and cuda,
                controls=lambda timeout: None,
            )
            if not grouped and isinstance(loop.timer, CudaStepTimer):
                loop.timer.group_ms = 0.0  # an event after every step
            loops[count_syncs, grouped] = (loop, emitted)
        loop, got = loops[count_syncs, grouped]
        got.clear()
        sync()
        t = time.perf_counter()
        loop.run(steps=n)  # ends with the workload's drain (a synchronize)
        rate = n / (time.perf_counter() - t)
        samples = [m for m in got if isinstance(m, Sample)]
        if count_syncs:
            last.update(
                samples=len(samples),
                syncs=[s.syncs_per_step for s in samples][-3:],
                bookkeeping_syncs=loop.bookkeeping_syncs,
                p50=samples[-1].step_ms_p50 if samples else None,
            )
        return rate

    # warm up (allocator, cuDNN, lazy init), then size n to about --seconds
    baseline(10)
    engine(10, True)
    probe = baseline(max(10, 50))
    n = max(20, int(probe * args.seconds))

    name = torch.cuda.get_device_name(device) if cuda else platform.processor() or "cpu"
    print(
        f"# engine overhead: {args.workload} {w.variant}, batch {w.batch_size}, image {w.image_size}, "
        f"bare loop {'by hand' if args.hand else 'workload.step()'}, "
        f"on {device} ({name})"
    )
    print(
        f"# torch {torch.__version__}, CUDA {torch.version.cuda}, python {platform.python_version()}, "
        f"{dt.datetime.now().astimezone().isoformat(timespec='seconds')}"
    )
    print(f"# {n} steps per measurement, {args.rounds} rounds, sample interval {args.sample_interval} s")
    cols = ["round", "bare steps/s", "engine steps/s", "ratio"]
    if args.no_sync_count:
        cols += ["engine, no sync count", "ratio"]
    if args.per_step_events:
        cols += ["engine, event per step", "ratio"]
    print("| " + " | ".join(cols) + " |")
    print("|" + "---|" * len(cols))
    ratios, ratios_nc, bares, engines, per_step = [], [], [], [], []
    for r in range(1, args.rounds + 1):
        if r % 2:  # ABBA: which runs first alternates, so a drift (clocks, heat) favours neither
            b = baseline(n)
            e = engine(n, True)
        else:
            e = engine(n, True)
            b = baseline(n)
        bares.append(b)
        engines.append(e)
        row = [str(r), f"{b:.1f}", f"{e:.1f}", f"{e / b:.3f}"]
        ratios.append(e / b)
        if args.no_sync_count:
            e2 = engine(n, False)
            ratios_nc.append(e2 / b)
            row += [f"{e2:.1f}", f"{e2 / b:.3f}"]
        if args.per_step_events:
            e3 = engine(n, True, grouped=False)
            per_step.append(e3)
            row += [f"{e3:.1f}", f"{e3 / b:.3f}"]
        print("| " + " | ".join(row) + " |", flush=True)
    med = statistics.median(ratios)
    print(f"\nmedian engine/bare: {med:.3f}  (target >= 0.98: {'OK' if med >= 0.98 else 'BELOW'})")
    if len(bares) >= 4:
        from gpudash.core.textfmt import fmt_ratio
        from gpudash.stats.comparison import compare, compare_paired, estimate_from_batches

        c = compare_paired(bares, engines)
        met = "met" if c.low is not None and c.low >= 0.98 else "not met"
        print(f"engine/bare, paired rounds: {fmt_ratio(c)}, {c.verdict} (target >= 0.98: {met})")
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
    if ratios_nc:
        print(f"median engine (no sync counting)/bare: {statistics.median(ratios_nc):.3f}")
    print(
        f"engine saw: syncs/step {last.get('syncs')}, syncs of its own bookkeeping "
        f"{last.get('bookkeeping_syncs')}, step p50 {last.get('p50')} ms, {last.get('samples')} samples"
    )
    w.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
