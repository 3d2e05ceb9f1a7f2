"""What gpudash's hooks cost a job's step, with the host's drift taken out: the small job's steps
(``benchmarks/jobs/small_job.py``: an MLP over a pinned DataLoader, a few milliseconds on an H100)
alternated one by one with and without the hooks' work, in one process.

    python benchmarks/job_hook_cost.py                        # cuda, 60 blocks of 50 pairs of steps
    python benchmarks/job_hook_cost.py --stretch 20 --pairs 5 --blocks 40   # 20-step stretches instead
    python benchmarks/job_hook_cost.py --device cpu --width 64 --blocks 4   # a quick check anywhere

Why in one process: the small job's own speed moves by several per cent from one process to the
next on the H100 machine, so the whole-process pairs of ``job_overhead.py`` cannot tell 1% from
nothing for it. Here the two steps of a pair share the process and the moment.

The hooks' work paced by time (a CUDA event a ~25 ms group of steps, a send to gpudash every
0.1 s) would fall on twice as few steps as in the job, since they see every other step and each
looks twice as long to them: an event after every hooked step where the job gets one every third.
So with single steps alternating, their two paces (``GROUP_MS``, ``SEND_EVERY_S``) are doubled in
this process, which gives them the job's pace: the group they settle on is printed at the end (3
for a 6.5 ms step). ``--as-is`` leaves the paces alone (more events and sends than the job: the
figure then errs on the side of more cost); ``--stretch N`` alternates N-step stretches instead,
paces as they are.

The hooks are gpudash's own (``gpudash/job/boot/gpudash_job_hooks.py``, loaded from their folder
as the bootstrap loads them, sending to a real gpudash-side channel that another process drains).
A hooked step takes its batch through their ``DataLoader.__next__`` wrapper and then calls
their optimizer-step hook, as torch's global post-hook calls it after ``opt.step()``; a bare step
takes its batch from torch's own ``__next__`` and does nothing more. Shared by both, so not in the
difference: the hooks' flusher thread (it wakes every 0.2 s) and the sync watch's process-wide
settings (they act only at a host-device sync; this step has none). The warm-up steps run with the
hooks, so their one-off FLOP count of a step is out of the timing. After the warm-up the heap is
frozen (``gc.freeze()``): a full collection over torch's objects lasts many steps, and the few
that come in a run would each land on one side of one block, which swamps a 1% difference;
collections go on (the hooks' own garbage too), over the objects made since. What that hides: a
full collection that the hooks' few objects a step would bring on sooner — a small share of the
job's own thousands a step (a batch is collated from one tuple per sample).

What this figure is: the hooks' cost inside the job's process, which is what they add to its
step. What it leaves out: gpudash's own process beside the job (NVML, reading the channel, the
CSV), which costs the job only what it takes from the CPUs and memory they share; the
whole-process pairs of ``job_overhead.py`` take it in (for ResNet-50 they resolve 1%; for this
host-bound job they do not).

Prints the A/A row (bare against bare: the method's own bias) and the hooks' row: the time over
the bare step with its 95% interval and verdict (target ≤ 1.01; the blocks' ratios read by pairs),
and µs a step; then what the hooks saw (their steps, their records dropped, their group), which
says they ran.
"""

from __future__ import annotations

import argparse
import datetime as dt
import gc
import importlib
import os
import platform
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.host_call_cost import alternate_steps  # noqa: E402
from gpudash.job.channel import HostChannel  # noqa: E402
from gpudash.job.launch import SOURCE_DIR  # noqa: E402

TARGET = 1.01
WARM_STEPS = 300


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", default="cuda")
    p.add_argument("--blocks", type=int, default=60, help="blocks of pairs (default: 60)")
    p.add_argument("--pairs", type=int, default=50, help="pairs of stretches a block (default: 50)")
    p.add_argument("--stretch", type=int, default=1, help="steps a stretch (default: 1: single steps alternate)")
    p.add_argument("--as-is", action="store_true", help="leave the hooks' paces alone with single steps")
    p.add_argument("--batch", type=int, default=512, help="the MLP's batch (default: 512, as small_job.py)")
    p.add_argument("--width", type=int, default=8192, help="the MLP's width (default: 8192, as job_overhead.py)")
    return p.parse_args()


def drain(channel: HostChannel) -> int:
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
    """gpudash's hooks object for this process, loaded as ``sitecustomize`` loads it (not installed:
    the benchmark calls what torch would call), its time-paced work ``pace`` times further apart."""
    boot = str(SOURCE_DIR / "job" / "boot")
    sys.path.insert(0, boot)
    try:
        module: Any = importlib.import_module("gpudash_job_hooks")
    finally:
        sys.path.remove(boot)
    hooks = module.Hooks(torch)
    hooks.times.group_ms *= pace
    hooks.outbox.every_s *= pace
    return hooks


def ratio_text(ratio: float, low: float | None, high: float | None) -> str:
    """``1.0012× [0.9990–1.0034]``: four places, since the target is a per cent."""
    if low is None or high is None:
        return f"{ratio:.4f}× (no interval)"
    return f"{ratio:.4f}× [{low:.4f}–{high:.4f}]"


def main() -> int:
    args = parse_args()
    channel = HostChannel()
    drainer = drain(channel)
    os.environ["GPUDASH_JOB_CHANNEL"] = channel.path
    os.environ["GPUDASH_JOB_SRC"] = str(SOURCE_DIR)
    try:
        return measure(args)
    finally:
        os.kill(drainer, 9)
        os.waitpid(drainer, 0)
        channel.close()


def print_header(args: argparse.Namespace, torch: Any, device: Any) -> None:
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else platform.processor() or "cpu"
    now = dt.datetime.now().astimezone().isoformat(timespec="seconds")
    print(f"# job hook cost: the small job's step (MLP 256-{args.width}-{args.width}-10, batch {args.batch}) on {name}")
    cpus = ",".join(str(c) for c in sorted(os.sched_getaffinity(0)))
    print(f"# torch {torch.__version__}, python {platform.python_version()}, {now}, on CPUs {cpus}")
    print(
        f"# `{' '.join(sys.argv)}`: {args.blocks} blocks of {args.pairs} pairs of {args.stretch}-step stretches a row, "
        "the order flipping each pair"
    )


def print_rows(args: argparse.Namespace, bare: Callable[[], None], hooked: Callable[[], None], label: str) -> None:
    """The A/A row, then the hooks' row (``label``), each as its alternation ends."""
    from gpudash.stats.comparison import compare_paired

    print(
        "| beside the step | bare step, ms | time over the bare step (95% CI) | verdict | µs a step | target ≤ 1.01 |"
    )
    print("|---|--:|---|---|--:|---|")
    steps = args.blocks * args.pairs * args.stretch  # a side's steps, a row
    for row, other in (("A/A: nothing (bare against bare)", bare), (label, hooked)):
        bare_rates, other_rates, bare_s, other_s = alternate_steps(bare, other, args.blocks, args.pairs)
        c = compare_paired(other_rates, bare_rates, higher_is_better=False)
        met = "met" if c.high is not None and c.high <= TARGET else "not shown"
        print(
            f"| {row} | {1000 * bare_s / steps:.3f} | {ratio_text(c.ratio, c.low, c.high)} | {c.verdict} | "
            f"{1e6 * (other_s - bare_s) / steps:+.2f} | {met} |",
            flush=True,
        )


def measure(args: argparse.Namespace) -> int:
    import torch
    from torch.utils.data import dataloader

    from benchmarks.jobs.small_job import build, train_step

    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        print("job_hook_cost.py: no CUDA here (--device cpu runs on the CPU)", file=sys.stderr)
        return 2
    torch.manual_seed(0)
    loader, model, opt = build(args.batch, args.width, device)
    paced = args.stretch == 1 and not args.as_is
    hooks = load_hooks(torch, pace=2.0 if paced else 1.0)
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
        for _ in range(args.stretch):
            bare_step()

    def hooked() -> None:
        for _ in range(args.stretch):
            hooked_step()

    for _ in range(WARM_STEPS):  # the allocator, the kernels, the hooks' first step and FLOP count
        hooked_step()
    if device.type == "cuda":
        torch.cuda.synchronize()
    gc.collect()
    gc.freeze()  # a full collection over torch's objects (many steps long) would land on one side of one block
    print_header(args, torch, device)
    steps_before, steps = hooks.steps, args.blocks * args.pairs * args.stretch  # a side's steps, a row
    print_rows(args, bare, hooked, "gpudash's hooks" + (" (at the job's pace)" if paced else ""))
    seen = hooks.steps - steps_before
    print(
        f"\nThe hooks: on={hooks.on}, {seen} steps seen of {steps} with them, "
        f"records dropped={hooks.outbox.channel.dropped}, step-time group={hooks.times.group} steps an event"
    )
    return 0 if hooks.on and seen == steps else 1


if __name__ == "__main__":
    sys.exit(main())
