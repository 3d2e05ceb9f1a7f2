"""A user's data-parallel ResNet-50 script for torchrun (``torchrun --nproc-per-node 2
ddp_resnet_job.py``): NCCL, DistributedDataParallel with the settings it is given, bf16 autocast
and channels_last, a DataLoader over synthetic images made on each rank's GPU once; each rank times
its own steps after a warm-up, and rank 0 prints the world's rate on its last line."""

from __future__ import annotations

import argparse
import os
import sys

import torch
import torch.distributed as dist
import torchvision
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
from benchmarks.jobs.resnet_job import SameBatch, classifier_step, timed_loop  # noqa: E402 - the repository's root first


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--batch", type=int, default=128, help="per rank")
    p.add_argument("--warmup", type=int, default=30)
    p.add_argument("--bucket-mb", type=float, default=25.0)
    p.add_argument("--tuned", action="store_true", help="gradient_as_bucket_view and static_graph")
    args = p.parse_args()
    dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    local = int(os.environ.get("LOCAL_RANK", "0"))
    device = torch.device("cuda", local) if torch.cuda.is_available() else torch.device("cpu")
    if device.type == "cuda":
        torch.cuda.set_device(device)
    torch.backends.cudnn.benchmark = True
    model = torchvision.models.resnet50().to(device, memory_format=torch.channels_last)
    ddp = DistributedDataParallel(
        model,
        device_ids=[local] if device.type == "cuda" else None,
        bucket_cap_mb=args.bucket_mb,
        gradient_as_bucket_view=args.tuned,
        static_graph=args.tuned,
    )
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1, momentum=0.9)
    loader = DataLoader(SameBatch(args.batch, args.steps, device), batch_size=None)
    took = timed_loop(classifier_step(ddp, opt, device), loader, args.steps, args.warmup, device)
    timed = args.steps - args.warmup
    if rank == 0:
        rate = timed * args.batch * world / took
        print(f"JOB steps={args.steps} timed_steps={timed} seconds={took:.6f} world_samples_per_s={rate:.3f}")
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
