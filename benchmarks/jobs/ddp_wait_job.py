"""A user's data-parallel ResNet-50 script for torchrun in which one rank waits before each batch
(``--wait-rank R --wait-ms 25``: a slow file system, a rank doing extra logging), written as users
write them: NCCL, ``DistributedDataParallel`` with ``gradient_as_bucket_view=True``, bf16 autocast,
channels_last, 128 synthetic images a rank made on its GPU once, the loss printed every 50 steps.
Each rank prints its own rate on its last line: ``JOB rank=R steps=N steps_per_s=X``.

``torchrun --nproc-per-node 2 ddp_wait_job.py --steps 400 --wait-rank 0 --wait-ms 25``
"""

from __future__ import annotations

import argparse
import os
import time

import torch
import torch.distributed as dist
import torchvision

WARMUP = 30


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--wait-rank", type=int, default=-1)
    parser.add_argument("--wait-ms", type=float, default=25.0)
    args = parser.parse_args()
    dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")
    rank = dist.get_rank()
    local = int(os.environ.get("LOCAL_RANK", "0"))
    device = torch.device("cuda", local) if torch.cuda.is_available() else torch.device("cpu")
    if device.type == "cuda":
        torch.cuda.set_device(device)
        torch.backends.cudnn.benchmark = True
    model = torchvision.models.resnet50().to(device, memory_format=torch.channels_last)
    ids = [local] if device.type == "cuda" else None
    ddp = torch.nn.parallel.DistributedDataParallel(model, device_ids=ids, gradient_as_bucket_view=True)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1, momentum=0.9)
    x = torch.randn(args.batch, 3, 224, 224, device=device).to(memory_format=torch.channels_last)
    y = torch.randint(0, 1000, (args.batch,), device=device)
    wait_s = args.wait_ms / 1e3 if rank == args.wait_rank else 0.0
    began = 0.0
    for step in range(1, args.steps + 1):
        if wait_s:
            time.sleep(wait_s)  # before each batch
        with torch.autocast(device.type, dtype=torch.bfloat16):
            loss = torch.nn.functional.cross_entropy(ddp(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if step % 50 == 0 and rank == 0:
            print(f"step {step} loss {loss.item():.3f}", flush=True)
        if step == WARMUP:
            if device.type == "cuda":
                torch.cuda.synchronize()
            began = time.perf_counter()
    if device.type == "cuda":
        torch.cuda.synchronize()
    rate = (args.steps - WARMUP) / (time.perf_counter() - began)
    print(f"JOB rank={rank} steps={args.steps} steps_per_s={rate:.3f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
