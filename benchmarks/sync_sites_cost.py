"""What naming each sync's line costs: the sync-heavy step with sync sites on, counting only, and off.

    python benchmarks/sync_sites_cost.py                     # sync_loss sync-heavy, batch 8
    python benchmarks/sync_sites_cost.py -b 32 --rounds 30

Each round runs ``--steps`` steps of the sync-heavy ``sync_loss`` step under each setting below, in
a shuffled order, timed with the wall clock between two synchronizes:

  * off:        no sync counter (``torch.cuda.set_sync_debug_mode`` untouched);
  * counting:   gpudash's ``SyncCounter`` (torch's sync warnings counted: what every run on a GPU does);
  * sites:      the same with each sync attributed to its line (``gpudash.core.sync_sites``) and
                ``torch.cuda.synchronize()`` / ``Event.synchronize()`` counted (gpudash.engine.explicit_waits).

Prints µs per step and each setting's time over another's (the geometric mean of the rounds' ratios,
its 95% interval and the verdict). The target: sites over counting at most 1.02. Needs CUDA.

    python benchmarks/sync_sites_cost.py --walk              # on any machine: µs a sync, counted vs named

``--walk`` times what naming a sync adds on the host, without a GPU: a stand-in of torch's sync
warning raised ``--depth`` frames deep (a step's call stack), counted by a ``SyncCounter`` without
and with sites; µs per sync, the median of ``--rounds`` rounds of 2,000.
"""

from __future__ import annotations

import argparse
import datetime as dt
import platform
import statistics
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.step_timing_cost import add_round_options, paired_interval, time_rounds  # noqa: E402

PAIRS = (("counting", "off"), ("sites", "counting"), ("sites", "off"))
TARGET = 1.02  # sites over counting


def parse_args() -> argparse.Namespace:
    """The command line (see the module's docstring)."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-b", "--batch-size", type=int, default=8, help="batch size (default: 8, a short step)")
    add_round_options(p, steps=40, rounds=16)
    p.add_argument("--walk", action="store_true", help="time the stack walk alone, on the host (no GPU needed)")
    p.add_argument("--depth", type=int, default=30, help="with --walk: frames between the step and the sync")
    return p.parse_args()


def main() -> int:
    args = parse_args()
    if args.walk:
        print_walk(args.depth, args.rounds)
        return 0
    import torch

    if not torch.cuda.is_available():
        print("sync_sites_cost.py needs CUDA", file=sys.stderr)
        return 2
    w = sync_heavy(args.batch_size)
    loops = setting_loops(w.step, torch)
    for run in loops.values():
        run(20)  # warm-up
    us = time_rounds(loops, args.steps, args.rounds, torch)
    print_table(args, torch.cuda.get_device_name(w.device), w.batch_size, us)
    w.close()
    return 0


def sync_heavy(batch_size: int) -> Any:
    """The sync-heavy ``sync_loss`` workload on CUDA at ``batch_size``."""
    from workloads.base import WorkloadOptions
    from workloads.factory import build

    return build("sync_loss", "cuda", WorkloadOptions(variant="sync-heavy", batch_size=batch_size))


def setting_loops(step: Callable[[], None], torch: Any) -> dict[str, Callable[[int], None]]:
    """Each setting as a loop of ``n`` steps (its counter installed around them)."""
    from gpudash.engine.measure import SyncCounter

    def off(n: int) -> None:
        for _ in range(n):
            step()

    def counted(sites: bool) -> Callable[[int], None]:
        def run(n: int) -> None:
            counter = SyncCounter(sites=sites)
            counter.install(torch)
            counter.attributing = True
            try:
                for _ in range(n):
                    step()
            finally:
                counter.uninstall()
            assert counter.count >= n, f"the sync-heavy step counted {counter.count} syncs in {n} steps"

        return run

    return {"off": off, "counting": counted(False), "sites": counted(True)}


def print_table(args: argparse.Namespace, gpu: str, batch: int, us: dict[str, list[float]]) -> None:
    """The header lines, µs a step of each setting, then the ratios with their intervals."""
    import torch

    print(
        f"# sync sites cost: sync_loss sync-heavy, batch {batch}, on {gpu}\n"
        f"# torch {torch.__version__}, CUDA {torch.version.cuda}, python {platform.python_version()}, "
        f"{dt.datetime.now().astimezone().isoformat(timespec='seconds')}\n"
        f"# {args.steps} steps per setting per round, {args.rounds} rounds, shuffled order"
    )
    print("| setting | µs/step, mean | µs/step, median |")
    print("|---|--:|--:|")
    for name, values in us.items():
        print(f"| {name} | {statistics.mean(values):.1f} | {statistics.median(values):.1f} |")
    print()
    print("| ratio | time (95% CI) | verdict |")
    print("|---|---|---|")
    for a, b in PAIRS:
        mean, lo, hi = paired_interval(us[a], us[b])
        verdict = "slower" if lo > 1.0 else "faster" if hi < 1.0 else "no change detected"
        target = f" (target ≤ {TARGET}: {'met' if hi <= TARGET else 'not shown'})" if (a, b) == PAIRS[1] else ""
        print(f"| {a} / {b} | {mean:.3f}× [{lo:.3f}–{hi:.3f}] | {verdict}{target} |")


def print_walk(depth: int, rounds: int, syncs: int = 2000) -> None:
    """µs per sync of a counter without and with sites, ``depth`` frames below the caller."""
    import time
    import warnings

    from gpudash.engine.measure import SYNC_WARNING, SyncCounter

    def sync_at(level: int) -> None:
        if level:
            sync_at(level - 1)
        else:
            warnings.warn(f"{SYNC_WARNING} (a stand-in)", UserWarning, stacklevel=1)

    def per_sync(sites: bool) -> float:
        counter = SyncCounter(sites=sites)
        counter.install(None)
        counter.attributing = True
        try:
            start = time.perf_counter()
            for _ in range(syncs):
                sync_at(depth)
            return (time.perf_counter() - start) / syncs * 1e6
        finally:
            counter.uninstall()

    us: dict[str, list[float]] = {"counting": [], "sites": []}
    for _ in range(rounds):
        for name in us:
            us[name].append(per_sync(name == "sites"))
    python = platform.python_version()
    print(f"# sync sites on the host: a sync {depth} frames deep, {rounds} rounds of {syncs}, python {python}")
    print("| setting | µs a sync, median | µs a sync, min |")
    print("|---|--:|--:|")
    for name, values in us.items():
        print(f"| {name} | {statistics.median(values):.2f} | {min(values):.2f} |")
    added = statistics.median(us["sites"]) - statistics.median(us["counting"])
    print(f"naming the line adds {added:.2f} µs a sync (medians)")


if __name__ == "__main__":
    sys.exit(main())
