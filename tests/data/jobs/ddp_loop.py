"""A user's data-parallel loop for torchrun (gloo on the CPU): DistributedSampler, DDP."""

from __future__ import annotations

import os
import sys

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
    done = 0
    for x, y in loader:
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        done += 1
        if done >= steps:
            break
    print(f"JOB rank={os.environ.get('RANK')} steps={done}", flush=True)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
