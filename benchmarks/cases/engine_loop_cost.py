"""The engine's own cost per step: ``StepLoop`` around a workload whose step does nothing, this
checkout against others (``trees``), each round a fresh interpreter per tree, alternating.

On the CPU, no torch work at all: what is left is the loop's Python (control checks, the window's
counting, sample bookkeeping). A real step takes milliseconds, so this says how much of an
engine/bare ratio can be the loop itself; GPU-side noise is the rest."""

from __future__ import annotations

import statistics
import subprocess
import sys
from dataclasses import dataclass

from benchmarks.harness.checkout import checkout_env, checkout_path
from benchmarks.harness.context import Run
from benchmarks.harness.params import param
from benchmarks.harness.schedule import Schedule, rounds
from benchmarks.harness.stamp import ROOT

CHILD = """
import sys, time
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

steps = int(sys.argv[1])
loop = StepLoop(NoopWorkload(), emit=lambda m: None, sample_interval_s=0.25, count_syncs=False)
t = time.perf_counter()
loop.run(steps=steps)
print((time.perf_counter() - t) / steps * 1e6)
"""


@dataclass(frozen=True)
class Params:
    trees: tuple[str, ...] = param((), "other checkouts of gpudash to set beside this one (comma-separated)")
    rounds: int = param(5, "rounds, every tree once a round")
    steps: int = param(200_000, "steps a round")


def us_per_step(tree: str, steps: int) -> float:
    """µs a step of the no-op loop, in a fresh interpreter importing ``tree``'s gpudash."""
    env = checkout_env(checkout_path(tree))
    out = subprocess.run([sys.executable, "-c", CHILD, str(steps)], capture_output=True, text=True, check=True, env=env)
    return float(out.stdout.strip().splitlines()[-1])


def measure(run: Run, p: Params) -> None:
    trees = [str(ROOT), *p.trees]
    arms = {tree: (lambda tree=tree: us_per_step(tree, p.steps)) for tree in trees}
    got = rounds(arms, p.rounds, Schedule.ABBA)
    run.comment(f"engine loop cost, no-op workload on the CPU, {p.steps} steps a round, {p.rounds} rounds")
    table = run.table(["tree", "µs/step (median)", "min", "max"])
    for tree, ts in got.items():
        run.values(tree, ts, "µs a step", higher_is_better=False)
        run.row(table, tree, f"{statistics.median(ts):.2f}", f"{min(ts):.2f}", f"{max(ts):.2f}")
