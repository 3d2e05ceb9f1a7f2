"""What timing a step costs the host: a hand-written step loop with and without CUDA events.

    python benchmarks/step_timing_cost.py                                  # examples/mine.py, batch 32
    python benchmarks/step_timing_cost.py -w examples/mine.py:workload -b 32 --rounds 24

The step is the user's own, written by hand from the ``Training`` gpudash was given (copy,
``zero_grad``, loss, ``backward``, ``step``). Each round runs ``--steps`` steps of every loop below,
in a shuffled order, and times them with the wall clock (one synchronize before and after):

  * hand:                      the step alone;
  * + timing event per step:   a CUDA event (``enable_timing=True``) recorded after each step;
  * + plain event per step:    the same with an event without timing;
  * + CudaStepTimer:           gpudash's step timer (events after groups of steps under 10 ms).

Prints µs per step (mean and median of the rounds) and each loop's time over the hand loop's: the
geometric mean of the rounds' ratios with its 95% interval (t over the rounds) and the verdict.
Needs CUDA.
"""

from __future__ import annotations

import argparse
import datetime as dt
import math
import platform
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

if TYPE_CHECKING:
    from workloads.user import UserWorkload


def parse_args() -> argparse.Namespace:
    """The command line (see the module's docstring)."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-w", "--workload", default="examples/mine.py:workload")
    p.add_argument("-b", "--batch-size", type=int, default=32)
    add_round_options(p, steps=300, rounds=24)
    return p.parse_args()


def add_round_options(p: argparse.ArgumentParser, *, steps: int, rounds: int) -> None:
    """``--steps`` (per loop per round) and ``--rounds``, with their defaults."""
    p.add_argument("--steps", type=int, default=steps, help=f"steps per loop per round (default: {steps})")
    p.add_argument(
        "--rounds",
        type=int,
        default=rounds,
        help=f"rounds, each loop once a round in a shuffled order (default: {rounds})",
    )


def main() -> int:
    args = parse_args()

    import torch

    from workloads.base import WorkloadOptions
    from workloads.factory import build

    if not torch.cuda.is_available():
        print("step_timing_cost.py needs CUDA", file=sys.stderr)
        return 2
    from workloads.user import UserWorkload

    w = build(args.workload, "cuda", WorkloadOptions(batch_size=args.batch_size))
    if not isinstance(w, UserWorkload):
        print("step_timing_cost.py times your own workload (-w file.py:workload), not a family", file=sys.stderr)
        return 2
    loops = timing_loops(hand_step(w), torch)
    for run in loops.values():
        run(50)  # warm-up
    us = time_rounds(loops, args.steps, args.rounds, torch)
    print_table(args, torch.cuda.get_device_name(w.device), us)
    w.close()
    return 0


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

        def run(n: int) -> None:
            for i in range(n):
                step()
                events[i % 8].record(stream)

        return run

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


def time_rounds(loops: dict[str, Callable[[int], None]], steps: int, rounds: int, torch: Any) -> dict[str, list[float]]:
    """µs per step of each loop, one value a round: ``steps`` steps of every loop each round, in a
    shuffled order, timed on the wall clock between two synchronizes."""
    us: dict[str, list[float]] = {name: [] for name in loops}
    order = random.Random(0)
    for _ in range(rounds):
        for name, run in order.sample(list(loops.items()), len(loops)):
            torch.cuda.synchronize()
            t = time.perf_counter()
            run(steps)
            torch.cuda.synchronize()
            us[name].append((time.perf_counter() - t) / steps * 1e6)
    return us


def print_table(args: argparse.Namespace, gpu: str, us: dict[str, list[float]]) -> None:
    """The header lines and a row per loop: µs a step, and its time over the hand loop's."""
    import torch

    print(
        f"# step timing cost: {args.workload}, batch {args.batch_size}, on {gpu}\n"
        f"# torch {torch.__version__}, CUDA {torch.version.cuda}, python {platform.python_version()}, "
        f"{dt.datetime.now().astimezone().isoformat(timespec='seconds')}\n"
        f"# {args.steps} steps per loop per round, {args.rounds} rounds, shuffled order"
    )
    print("| loop | µs/step, mean | µs/step, median | time over hand (95% CI) | verdict |")
    print("|---|--:|--:|---|---|")
    for name, values in us.items():
        if name == "hand":
            print(f"| {name} | {statistics.mean(values):.1f} | {statistics.median(values):.1f} | – | (baseline) |")
            continue
        mean, lo, hi = paired_interval(values, us["hand"])
        verdict = "slower" if lo > 1.0 else "faster" if hi < 1.0 else "no change detected"
        print(
            f"| {name} | {statistics.mean(values):.1f} | {statistics.median(values):.1f} | "
            f"{mean:.3f}× [{lo:.3f}–{hi:.3f}] | {verdict} |"
        )


def paired_interval(values: list[float], base: list[float]) -> tuple[float, float, float]:
    """The geometric mean of the rounds' ratios ``values``/``base`` and its 95% interval (t over
    the rounds' logs): (mean, low, high)."""
    from scipy import stats

    logs = [math.log(a / b) for a, b in zip(values, base, strict=True)]
    mean, se = statistics.mean(logs), statistics.stdev(logs) / math.sqrt(len(logs))
    half = stats.t.ppf(0.975, len(logs) - 1) * se
    return math.exp(mean), math.exp(mean - half), math.exp(mean + half)


if __name__ == "__main__":
    sys.exit(main())
