"""The engine's own cost per step: StepLoop around a workload whose step does nothing.

    python benchmarks/engine_loop_cost.py                      # this checkout
    python benchmarks/engine_loop_cost.py --tree /path/to/old  # another checkout of gpudash

On the CPU, no torch work at all: what is left is the loop's Python (control checks, the
window's counting, sample bookkeeping). A real step takes milliseconds, so this says how
much of an engine/bare ratio can be the loop itself; GPU-side noise is the rest. Runs each
tree in a fresh interpreter, alternating, and prints µs per step (median of the rounds).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHILD = """
import sys, time
sys.path.insert(0, sys.argv[1])
import torch
from gpudash.engine.loop import StepLoop

class Info:
    name = "noop"

class NoopWorkload:
    info = Info()
    device = torch.device("cpu")
    batch_size = samples_per_step = 4
    variant = "noop"
    last_loss = None
    world_size = 1
    def step(self): pass
    def drain(self): pass

try:  # what the loop reads of a workload's knobs (older trees had none)
    from workloads.knobs import Knobs
    NoopWorkload.knobs = Knobs()
except ImportError:
    pass

steps = int(sys.argv[2])
loop = StepLoop(NoopWorkload(), emit=lambda m: None, sample_interval_s=0.25, count_syncs=False)
t = time.perf_counter()
loop.run(steps=steps)
print((time.perf_counter() - t) / steps * 1e6)
"""


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tree", action="append", default=[], help="another gpudash checkout to compare")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--steps", type=int, default=200_000)
    args = p.parse_args()
    trees = [str(ROOT), *args.tree]
    times: dict[str, list[float]] = {t: [] for t in trees}
    for _ in range(args.rounds):
        for tree in trees:  # interleaved: A B A B
            out = subprocess.run(
                [sys.executable, "-c", CHILD, tree, str(args.steps)], capture_output=True, text=True, check=True
            )
            times[tree].append(float(out.stdout.strip().splitlines()[-1]))
    print(f"# engine loop cost, no-op workload on the CPU, {args.steps} steps a round, {args.rounds} rounds")
    print("| tree | µs/step (median) | min | max |")
    print("|---|---|---|---|")
    for tree, ts in times.items():
        print(f"| {tree} | {statistics.median(ts):.2f} | {min(ts):.2f} | {max(ts):.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
