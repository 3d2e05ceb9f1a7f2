"""A user's data-parallel loop for torchrun (gloo on the CPU): DistributedSampler, DDP.
``ddp_loop.py STEPS [RANK:STEP:SECONDS]``: that rank stops for that long before that step (a
straggler, or a hang: the other ranks wait in the gradients' all-reduce)."""

from __future__ import annotations

import os
import sys
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def main() -> int:
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    dist.init_process_group("gloo")
    torch.manual_seed(0)
    data = TensorDataset(torch.randn(4096, 16), torch.randn(4096, 1))
    loader = DataLoader(data, batch_size=8, sampler=DistributedSampler(data))
    model = DistributedDataParallel(torch.nn.Linear(16, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    hang_rank, hang_step, hang_s = (int(v) for v in sys.argv[2].split(":")) if len(sys.argv) > 2 else (-1, 0, 0)
    done = 0
    sampler = loader.sampler
    assert isinstance(sampler, DistributedSampler)
    for epoch in range(10**9):
        sampler.set_epoch(epoch)
        for x, y in loader:
            if dist.get_rank() == hang_rank and done + 1 == hang_step:
                time.sleep(hang_s)  # this rank stops here
            loss = torch.nn.functional.mse_loss(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            done += 1
            if done >= steps:
                break
        if done >= steps:
            break
    print(f"JOB rank={os.environ.get('RANK')} steps={done}", flush=True)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
