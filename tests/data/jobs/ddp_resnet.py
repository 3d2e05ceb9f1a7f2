"""A user's torchrun ResNet-50 job on GPUs (NCCL), written as users write them: DDP with
``gradient_as_bucket_view``, bf16 autocast, channels-last, a DataLoader of indices whose batches
are made on the GPU; one rank's input can be slower (``--slow-rank R --input-ms X``: its Dataset
sleeps X ms a batch). Its own figure, from CUDA events after a warm-up, on its last lines:
``JOB rank=R steps=N steps_per_s=X``; ``JOB end rank=R`` in its ``finally``.

``torchrun --nproc-per-node 2 ddp_resnet.py --steps 300``
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Iterator

import torch
import torch.distributed as dist
import torchvision
from torch.utils.data import DataLoader, Dataset, DistributedSampler

WARMUP = 30


class Indices(Dataset[int]):
    def __init__(self, n: int, delay_s: float) -> None:
        self.n, self.delay_s = n, delay_s

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> int:
        if self.delay_s:
            time.sleep(self.delay_s)
        return i


def batches(loader: DataLoader[int]) -> Iterator[torch.Tensor]:
    sampler = loader.sampler
    for epoch in range(1 << 30):
        if isinstance(sampler, DistributedSampler):
            sampler.set_epoch(epoch)
        yield from loader


class Windows:
    """The job's own profiler windows, as users take them: 20 steps every ``every_s`` seconds."""

    def __init__(self, every_s: float, rank: int) -> None:
        self.every_s, self.rank, self.last = every_s, rank, time.monotonic()
        self.prof: torch.profiler.profile | None = None
        self.steps = self.n = 0

    def step(self) -> None:
        if not self.every_s:
            return
        if self.prof is not None:
            self.steps += 1
            if self.steps >= 20:
                self.prof.stop()
                self.prof.export_chrome_trace(f"/tmp/own-{self.rank}-{self.n}.json")
                self.prof, self.last, self.n = None, time.monotonic(), self.n + 1
        elif time.monotonic() - self.last >= self.every_s:
            activities = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
            self.prof, self.steps = torch.profiler.profile(activities=activities), 0
            self.prof.start()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--slow-rank", type=int, default=-1)
    parser.add_argument("--input-ms", type=float, default=0.0)
    parser.add_argument("--profile-every", type=float, default=0.0, help="own profiler windows")
    args = parser.parse_args()
    dist.init_process_group("nccl")
    rank, local = dist.get_rank(), int(os.environ.get("LOCAL_RANK", "0"))
    device = torch.device("cuda", local)
    torch.cuda.set_device(device)
    torch.backends.cudnn.benchmark = True
    model = torchvision.models.resnet50().to(device, memory_format=torch.channels_last)
    ddp = torch.nn.parallel.DistributedDataParallel(model, device_ids=[local], gradient_as_bucket_view=True)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1, momentum=0.9)
    per_sample = args.input_ms / 1e3 / args.batch if rank == args.slow_rank else 0.0
    data = Indices(1 << 20, per_sample)
    loader = DataLoader(data, batch_size=args.batch, sampler=DistributedSampler(data), num_workers=0)
    x = torch.randn(args.batch, 3, 224, 224, device=device).to(memory_format=torch.channels_last)
    y = torch.randint(0, 1000, (args.batch,), device=device)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    done, windows = 0, Windows(args.profile_every, rank)
    try:
        for _ in batches(loader):
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = torch.nn.functional.cross_entropy(ddp(x), y)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            windows.step()
            done += 1
            if done == WARMUP:
                start.record()
            if done >= args.steps:
                break
        end.record()
        end.synchronize()
        rate = (done - WARMUP) / (start.elapsed_time(end) / 1e3)
        print(f"JOB rank={rank} steps={done} steps_per_s={rate:.3f}", flush=True)
    finally:
        print(f"JOB end rank={rank}", flush=True)
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
