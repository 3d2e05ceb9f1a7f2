"""What gpudash's hooks cost a job's step, with the host's drift taken out: the small job's steps
(``benchmarks/jobs/small_job.py``: an MLP over a pinned DataLoader, a few ms on an H100) alternated
one by one with and without the hooks' work, in one process.

Why in one process: the small job's own speed moves by several per cent from one process to the
next on the H100 machine, so the whole-process pairs of ``job_overhead`` cannot tell 1% from
nothing for it. Here the two steps of a pair share the process and the moment.

The hooks' work paced by time (a CUDA event a ~25 ms group of steps, a send to gpudash every 0.1 s)
would fall on twice as few steps as in the job, since they see every other step and each looks twice
as long to them. So with single steps alternating their two paces are doubled in this process, which
gives them the job's pace (the group they settle on is said at the end: 3 for a 6.5 ms step).
``as_is`` leaves the paces alone (more events and sends than the job: the figure errs on the side of
more cost); ``stretch N`` alternates N-step stretches instead, paces as they are.

The hooks are gpudash's own (``gpudash.boot.gpudash_boot.hooks``, the module the bootstrap imports,
sending to a real gpudash-side channel that another process drains). A
hooked step takes its batch through their ``DataLoader.__next__`` wrapper and then calls their
optimizer-step hook, as torch's global post-hook does; a bare step takes its batch from torch's own
``__next__``. After the warm-up the heap is frozen (``gc.freeze()``): a full collection over torch's
objects lasts many steps, and the few in a run would each land on one side of one block. What this
leaves out: gpudash's own process beside the job, which costs the job only what it takes from the
CPUs they share (the whole-process pairs of ``job_overhead`` take it in). The goal: ≤ 1.01."""

from __future__ import annotations

import gc
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from benchmarks.harness.case import Unavailable
from benchmarks.harness.context import Run
from benchmarks.harness.params import OnDevice, param
from benchmarks.harness.schedule import alternate_steps
from benchmarks.harness.stats import Target, ratio, ratio_text

GOAL = Target(1.01, at_least=False)
WARM_STEPS = 300


@dataclass(frozen=True)
class Params(OnDevice):
    blocks: int = param(60, "blocks of pairs")
    pairs: int = param(50, "pairs of stretches a block")
    stretch: int = param(1, "steps a stretch (1: single steps alternate)")
    as_is: bool = param(False, "leave the hooks' paces alone with single steps")
    batch: int = param(512, "the MLP's batch (as small_job.py)")
    width: int = param(8192, "the MLP's width (as job_overhead's small job)")


def drain(channel: Any) -> int:
    """A child process that reads the channel, as gpudash does, until this process ends (fork:
    before torch is imported)."""
    parent = os.getpid()
    pid = os.fork()
    if pid == 0:  # the child: no torch, no threads
        try:
            while os.getppid() == parent:
                channel.receive()
                time.sleep(0.02)
        finally:
            os._exit(0)
    return pid


class Batches:
    """The loader's batches, endlessly: a new epoch's iterator made at the end of the step that took
    the last batch (timed, as the job pays it; its first batch draws the epoch's order)."""

    def __init__(self, loader: Any) -> None:
        self.loader, self.iterator, self.left = loader, iter(loader), len(loader)

    def take(self, next_batch: Callable[[Any], Any]) -> Any:
        self.left -= 1
        return next_batch(self.iterator)

    def renew(self) -> None:
        if self.left == 0:
            self.iterator, self.left = iter(self.loader), len(self.loader)


def load_hooks(torch: Any, pace: float = 1.0) -> Any:
    """gpudash's hooks object for this process, as ``sitecustomize`` makes it (not installed: the case
    calls what torch would call), its time-paced work ``pace`` times further apart."""
    from gpudash.boot.gpudash_boot.hooks import Hooks

    hooks = Hooks(torch)
    hooks.times.group_ms *= pace
    hooks.outbox.every_s *= pace
    return hooks


def measure(run: Run, p: Params) -> None:
    from gpudash.boot.gpudash_boot.wire import CHANNEL_ENV
    from gpudash.job.channel import HostChannel

    channel = HostChannel()
    drainer = drain(channel)
    os.environ[CHANNEL_ENV] = channel.path
    try:
        hooked_steps(run, p)
    finally:
        os.kill(drainer, 9)
        os.waitpid(drainer, 0)
        channel.close()


def steps_of(p: Params, torch: Any, device: Any) -> tuple[Callable[[], None], Callable[[], None], Any]:
    """The bare and the hooked stretch of the small job's steps, and the hooks (warmed up)."""
    from torch.utils.data import dataloader

    from benchmarks.jobs.small_job import build, train_step

    torch.manual_seed(0)
    loader, model, opt = build(p.batch, p.width, device)
    hooks = load_hooks(torch, pace=2.0 if p.stretch == 1 and not p.as_is else 1.0)
    threading.Thread(target=hooks.flush_forever, name="gpudash-job-flush", daemon=True).start()
    batches = Batches(loader)
    torch_next = dataloader._BaseDataLoaderIter.__next__
    hooked_next = hooks.loader.wrap(torch_next)

    def bare_step() -> None:
        train_step(model, opt, batches.take(torch_next), device)
        batches.renew()

    def hooked_step() -> None:
        train_step(model, opt, batches.take(hooked_next), device)
        hooks.optimizer_stepped(opt, (), {})
        batches.renew()

    def bare() -> None:
        for _ in range(p.stretch):
            bare_step()

    def hooked() -> None:
        for _ in range(p.stretch):
            hooked_step()

    for _ in range(WARM_STEPS):  # the allocator, the kernels, the hooks' first step and FLOP count
        hooked_step()
    return bare, hooked, hooks


def hooked_steps(run: Run, p: Params) -> None:
    import torch

    device = torch.device(p.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise Unavailable("no CUDA here (-p device=cpu runs on the CPU)")
    bare, hooked, hooks = steps_of(p, torch, device)
    if device.type == "cuda":
        torch.cuda.synchronize()
    gc.collect()
    gc.freeze()  # a full collection over torch's objects (many steps long) would land on one side of one block
    paced = p.stretch == 1 and not p.as_is
    cpus = ",".join(str(c) for c in sorted(os.sched_getaffinity(0)))
    run.comment(
        f"job hook cost: the small job's step (MLP 256-{p.width}-{p.width}-10, batch {p.batch}), on CPUs {cpus}"
    )
    run.comment(
        f"{p.blocks} blocks of {p.pairs} pairs of {p.stretch}-step stretches a row, the order flipping each pair"
    )
    steps_before, steps = hooks.steps, p.blocks * p.pairs * p.stretch  # a side's steps, a row
    table = run.table(
        [
            "beside the step",
            "bare step, ms",
            "time over the bare step (95% CI)",
            "verdict",
            "µs a step",
            f"target {GOAL.text}",
        ],
        ["---", "--:", "---", "---", "--:", "---"],
    )
    label = "gpudash's hooks" + (" (at the job's pace)" if paced else "")
    for row, other in (("A/A: nothing (bare against bare)", bare), (label, hooked)):
        got = alternate_steps(bare, other, p.blocks, p.pairs)
        f = run.keep(row, ratio(row, got.other_rates, got.bare_rates, higher_is_better=False, target=GOAL))
        run.values(f"{row}: bare", got.bare_rates, "stretches/s")
        run.values(f"{row}: other", got.other_rates, "stretches/s")
        cost_us = 1e6 * (got.other_s - got.bare_s) / steps
        run.row(table, row, f"{1000 * got.bare_s / steps:.3f}", ratio_text(f, 4), f.verdict, f"{cost_us:+.2f}", f.met)
    seen = hooks.steps - steps_before
    run.line()
    run.line(
        f"The hooks: on={hooks.on}, {seen} steps seen of {steps} with them, "
        f"records dropped={hooks.outbox.channel.dropped}, step-time group={hooks.times.group} steps an event"
    )
    if not (hooks.on and seen == steps):
        run.failed = f"the hooks saw {seen} steps of {steps} (on={hooks.on})"
