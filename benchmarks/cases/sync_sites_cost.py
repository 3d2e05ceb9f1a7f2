"""What naming each sync's line costs: the sync-heavy step with sync sites on, counting only, and off
(``sync_sites_cost``, CUDA), and the stack walk alone on the host (``sync_sites_walk``, anywhere).

``sync_sites_cost``: each round runs ``steps`` steps of ``sync_loss``'s sync-making variant (the
registry's first that is not sync-free) under each setting, in a shuffled order, timed with the
wall clock between two synchronizes: *off*, no sync counter; *counting*, gpudash's ``SyncCounter``
(torch's sync warnings counted: what every run on a GPU does); *sites*, the same with each sync
attributed to its line (``gpudash.boot.gpudash_boot.sync_sites``) and ``synchronize()`` / ``Event.synchronize()``
counted. Each setting's time over another's is read by rounds. The goal: sites over counting ≤ 1.02.

``sync_sites_walk``: a stand-in of torch's sync warning raised ``depth`` frames deep (a step's call
stack), counted by a ``SyncCounter`` without and with sites: µs a sync, the median of the rounds."""

from __future__ import annotations

import platform
import statistics
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from benchmarks.cases.step_timing_cost import us_per_step
from benchmarks.harness.case import Unavailable
from benchmarks.harness.context import Run
from benchmarks.harness.params import param
from benchmarks.harness.result import Figure
from benchmarks.harness.schedule import Schedule, rounds
from benchmarks.harness.stats import Target, ratio, ratio_text

PAIRS = (("counting", "off"), ("sites", "counting"), ("sites", "off"))
GOAL = Target(1.02, at_least=False)  # sites over counting


@dataclass(frozen=True)
class Params:
    batch_size: int = param(8, "the batch size (a short step)")
    steps: int = param(40, "steps per setting per round")
    rounds: int = param(16, "rounds, each setting once a round in a shuffled order")


@dataclass(frozen=True)
class WalkParams:
    depth: int = param(30, "frames between the step and the sync")
    rounds: int = param(16, "rounds of 2,000 syncs each way")


def sync_heavy(batch_size: int) -> Any:
    """``sync_loss`` on CUDA at ``batch_size``, in its first variant that makes the host wait."""
    from workloads.base import WorkloadOptions
    from workloads.factory import build
    from workloads.registry import FAMILIES

    variant = next(v.name for v in FAMILIES["sync_loss"].variants if not v.sync_free)
    return build("sync_loss", "cuda", WorkloadOptions(variant=variant, batch_size=batch_size))


def setting_loops(step: Callable[[], None], torch: Any) -> dict[str, Callable[[int], None]]:
    """Each setting as a loop of ``n`` steps (its counter installed around them)."""
    from gpudash.engine.measure import SyncCounter

    def off(n: int) -> None:
        for _ in range(n):
            step()

    def counted(sites: bool) -> Callable[[int], None]:
        def steps(n: int) -> None:
            counter = SyncCounter(sites=sites)
            counter.install(torch)
            counter.attributing = True
            try:
                for _ in range(n):
                    step()
            finally:
                counter.uninstall()
            assert counter.count >= n, f"the sync-heavy step counted {counter.count} syncs in {n} steps"

        return steps

    return {"off": off, "counting": counted(False), "sites": counted(True)}


def measure(run: Run, p: Params) -> None:
    import torch

    if not torch.cuda.is_available():
        raise Unavailable("needs CUDA (sync_sites_walk times the stack walk anywhere)")
    w = sync_heavy(p.batch_size)
    loops = setting_loops(w.step, torch)
    for loop in loops.values():
        loop(20)  # warm-up
    arms = {name: (lambda loop=loop: us_per_step(loop, p.steps, torch)) for name, loop in loops.items()}
    us = rounds(arms, p.rounds, Schedule.PAIRS)
    run.comment(f"sync sites cost: sync_loss {w.variant}, batch {w.batch_size}")
    run.comment(f"{p.steps} steps per setting per round, {p.rounds} rounds, shuffled order")
    table = run.table(["setting", "µs/step, mean", "µs/step, median"], ["---", "--:", "--:"])
    for name, values in us.items():
        run.values(name, values, "µs a step", higher_is_better=False)
        run.row(table, name, f"{statistics.mean(values):.1f}", f"{statistics.median(values):.1f}")
    run.line()
    ratios = run.table(["ratio", "time (95% CI)", "verdict"])
    for a, b in PAIRS:
        target = GOAL if (a, b) == PAIRS[1] else None
        f = run.keep(f"{a} / {b}", ratio(f"{a} / {b}", us[b], us[a], higher_is_better=False, target=target))
        said = f" (target {f.target}: {f.met})" if target is not None else ""
        run.row(ratios, f"{a} / {b}", ratio_text(f, 3), f"{f.verdict}{said}")
    w.close()


def per_sync_us(sites: bool, depth: int, syncs: int = 2000) -> float:
    """µs a sync of a counter without or with sites, ``depth`` frames below the caller."""
    from gpudash.boot.gpudash_boot.sync_watch import SYNC_WARNING
    from gpudash.engine.measure import SyncCounter

    def sync_at(level: int) -> None:
        if level:
            sync_at(level - 1)
        else:
            warnings.warn(f"{SYNC_WARNING} (a stand-in)", UserWarning, stacklevel=1)

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


def walk(run: Run, p: WalkParams) -> None:
    arms = {name: (lambda name=name: per_sync_us(name == "sites", p.depth)) for name in ("counting", "sites")}
    us = rounds(arms, p.rounds, Schedule.ABBA)
    python = platform.python_version()
    run.comment(f"sync sites on the host: a sync {p.depth} frames deep, {p.rounds} rounds of 2000, python {python}")
    table = run.table(["setting", "µs a sync, median", "µs a sync, min"], ["---", "--:", "--:"])
    for name, values in us.items():
        run.values(name, values, "µs a sync", higher_is_better=False)
        run.row(table, name, f"{statistics.median(values):.2f}", f"{min(values):.2f}")
    added = statistics.median(us["sites"]) - statistics.median(us["counting"])
    run.line()
    run.say("added", Figure("value", f"naming the line adds {added:.2f} µs a sync (medians)", added, unit="µs"))
