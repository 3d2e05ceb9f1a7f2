"""A DDP job of short steps on gloo (2 ranks on the CPU): 12 linear layers of 256, batch 32, buckets
of 0.3 MB (6 of them), 400 steps; rank 0 prints the median step (ms) after 50. ``hook`` registers
DDP's reference Python comm hook, which gpudash registered on every DDP model until session 21.

torchrun --standalone --nproc-per-node 2 ddp_short_steps.py [builtin|hook]
"""

from __future__ import annotations

import statistics
import sys
import time

import torch
import torch.distributed as dist
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.nn.parallel import DistributedDataParallel


def main() -> None:
    dist.init_process_group("gloo")
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = torch.nn.Sequential(*[torch.nn.Linear(256, 256) for _ in range(12)])
    ddp = DistributedDataParallel(model, bucket_cap_mb=0.3)
    if sys.argv[1:] == ["hook"]:
        ddp.register_comm_hook(None, default_hooks.allreduce_hook)
    opt = torch.optim.SGD(ddp.parameters(), lr=1e-3)
    x = torch.randn(32, 256)
    took = []
    for _ in range(400):
        t = time.perf_counter()
        opt.zero_grad()
        ddp(x).sum().backward()
        opt.step()
        took.append(time.perf_counter() - t)
    if dist.get_rank() == 0:
        print(f"median_ms {statistics.median(took[50:]) * 1e3:.4f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
