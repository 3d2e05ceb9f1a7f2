"""A user's gloo DDP script for torchrun: a DistributedSampler over an in-memory dataset; rank
``--slow`` (-1: none) sleeps 20 ms before each batch."""

import argparse
import time

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

parser = argparse.ArgumentParser()
parser.add_argument("--slow", type=int, default=-1)
parser.add_argument("--epochs", type=int, default=3)
args = parser.parse_args()
dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(0)
model = DistributedDataParallel(nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 10)))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
data = torch.utils.data.TensorDataset(torch.randn(4096, 256), torch.randint(0, 10, (4096,)))
sampler: torch.utils.data.distributed.DistributedSampler[tuple[torch.Tensor, ...]] = (
    torch.utils.data.distributed.DistributedSampler(data)
)
loader = torch.utils.data.DataLoader(data, batch_size=64, sampler=sampler)
for epoch in range(args.epochs):
    sampler.set_epoch(epoch)
    for x, y in loader:
        if rank == args.slow:
            time.sleep(0.02)
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    if rank == 0:
        print(f"epoch {epoch} loss {loss.item():.3f}", flush=True)
dist.destroy_process_group()
