"""A user's data-parallel ResNet-50 script for torchrun (``torchrun --nproc-per-node 2
ddp_resnet_job.py``): NCCL, DistributedDataParallel with the settings it is given, bf16 autocast
and channels_last, a DataLoader over synthetic images made on each rank's GPU once. One rank can
wait before each batch, in its step (``--wait-rank R --wait-ms 25``: a slow file system, a rank
doing extra logging). Each rank times its own steps after a warm-up and prints its rate,
``JOB rank=R steps=N steps_per_s=X``; rank 0 then prints the world's rate on the last line.

``torchrun --nproc-per-node 2 ddp_resnet_job.py --steps 400 --bucket-view --wait-rank 0 --wait-ms 25``
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist
import torchvision
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
from benchmarks.jobs.resnet_job import SameBatch, classifier_step, timed_loop  # noqa: E402 - the repository's root first


def join_group() -> tuple[int, int, torch.device]:
    """Join torchrun's process group (NCCL on GPUs, gloo on the CPU): this rank, the world's size
    and the rank's device (its GPU made the current one)."""
    dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")
    local = int(os.environ.get("LOCAL_RANK", "0"))
    device = torch.device("cuda", local) if torch.cuda.is_available() else torch.device("cpu")
    if device.type == "cuda":
        torch.cuda.set_device(device)
    return dist.get_rank(), dist.get_world_size(), device


def resnet50_ddp(
    device: torch.device, bucket_mb: float = 25.0, bucket_view: bool = False, static_graph: bool = False
) -> tuple[DistributedDataParallel, torch.optim.Optimizer]:
    """ResNet-50 in channels_last on ``device``, wrapped in DDP with those settings, and its SGD."""
    torch.backends.cudnn.benchmark = True
    model = torchvision.models.resnet50().to(device, memory_format=torch.channels_last)
    ddp = DistributedDataParallel(
        model,
        device_ids=[device.index] if device.type == "cuda" else None,
        bucket_cap_mb=bucket_mb,
        gradient_as_bucket_view=bucket_view,
        static_graph=static_graph,
    )
    return ddp, torch.optim.SGD(ddp.parameters(), lr=0.1, momentum=0.9)


def warmed_step(
    ddp: DistributedDataParallel, opt: torch.optim.Optimizer, device: torch.device, batch: int = 128, warmup: int = 40
) -> Callable[[], None]:
    """The probes' starting line: one step of ``classifier_step`` on one synthetic batch made once,
    run ``warmup`` times, the GPU's work done and every rank past a barrier."""
    images_labels = SameBatch(batch, 1, device)[0]
    train = classifier_step(ddp, opt, device)

    def step() -> None:
        train(images_labels)

    for _ in range(warmup):
        step()
    if device.type == "cuda":
        torch.cuda.synchronize()
    dist.barrier()
    return step


def step_times_ms(step: Callable[[], None], steps: int) -> list[float]:
    """Each of ``steps`` steps' time on the host, ms (from one step's start to the next's: the
    job's pace), the GPU's work done at the end."""
    marks = [time.perf_counter()]
    for _ in range(steps):
        step()
        marks.append(time.perf_counter())
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    return [(b - a) * 1e3 for a, b in zip(marks, marks[1:], strict=False)]


def waiting(step: Callable[[Any], None], wait_s: float) -> Callable[[Any], None]:
    """``step``, each call first sleeping ``wait_s`` seconds (the rank's own work, not its input)."""

    def late_step(batch: Any) -> None:
        time.sleep(wait_s)
        step(batch)

    return late_step


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--batch", type=int, default=128, help="per rank")
    p.add_argument("--warmup", type=int, default=30)
    p.add_argument("--bucket-mb", type=float, default=25.0)
    p.add_argument("--bucket-view", action="store_true", help="gradient_as_bucket_view alone")
    p.add_argument("--tuned", action="store_true", help="gradient_as_bucket_view and static_graph")
    p.add_argument("--wait-rank", type=int, default=-1, help="the rank that waits before each batch")
    p.add_argument("--wait-ms", type=float, default=25.0)
    args = p.parse_args()
    rank, world, device = join_group()
    ddp, opt = resnet50_ddp(device, args.bucket_mb, args.bucket_view or args.tuned, args.tuned)
    step = classifier_step(ddp, opt, device)
    if rank == args.wait_rank:
        step = waiting(step, args.wait_ms / 1e3)
    loader = DataLoader(SameBatch(args.batch, args.steps, device), batch_size=None)
    took = timed_loop(step, loader, args.steps, args.warmup, device)
    timed = args.steps - args.warmup
    print(f"JOB rank={rank} steps={args.steps} steps_per_s={timed / took:.3f}", flush=True)
    dist.barrier()  # every rank's line before the world's
    if rank == 0:
        rate = timed * args.batch * world / took
        print(f"JOB steps={args.steps} timed_steps={timed} seconds={took:.6f} world_samples_per_s={rate:.3f}")
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
