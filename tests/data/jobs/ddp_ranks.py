"""A user's torchrun job (gloo on the CPU, NCCL on GPUs), written as users write them: DDP, or FSDP2
(``--fsdp``), optionally accumulating gradients under ``no_sync()`` (``--accumulate K``), and one
rank whose input is slower (``--slow-rank R``: its Dataset sleeps ``--item-ms`` more a sample).

``python -m torch.distributed.run --nproc-per-node 3 ddp_ranks.py --steps 60 --slow-rank 2``
prints each rank's own figure (``JOB rank=R steps=N steps_per_s=X``) and, in its ``finally``,
``JOB end rank=R`` — on every way out but a kill.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Iterator

import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, Dataset, DistributedSampler


class SlowItems(Dataset[tuple[torch.Tensor, torch.Tensor]]):
    """Random samples; each takes ``delay_s`` to make."""

    def __init__(self, n: int, dim: int, delay_s: float) -> None:
        self.x, self.y = torch.randn(n, dim), torch.randn(n, 1)
        self.delay_s = delay_s

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        if self.delay_s:
            time.sleep(self.delay_s)
        return self.x[i], self.y[i]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--dim", type=int, default=256)
    parser.add_argument("--slow-rank", type=int, default=-1)
    parser.add_argument("--item-ms", type=float, default=2.0)
    parser.add_argument("--fsdp", action="store_true")
    parser.add_argument("--accumulate", type=int, default=1)
    args = parser.parse_args()
    cuda = torch.cuda.is_available()
    dist.init_process_group("nccl" if cuda else "gloo")
    rank = dist.get_rank()
    device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0"))) if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(device)
    torch.manual_seed(0)
    delay = args.item_ms / 1e3 if rank == args.slow_rank else 0.0
    data = SlowItems(1 << 14, args.dim, delay)
    loader = DataLoader(data, batch_size=args.batch, sampler=DistributedSampler(data, seed=1))
    model = build(args, device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    done, micro, began = 0, 0, 0.0
    try:
        for x, y in _batches(loader):
            x, y = x.to(device), y.to(device)
            micro += 1
            last = micro % args.accumulate == 0
            ddp = model if isinstance(model, torch.nn.parallel.DistributedDataParallel) else None
            sync = ddp.no_sync() if (ddp is not None and not last) else _nothing()
            with sync:
                loss = torch.nn.functional.mse_loss(model(x), y) / args.accumulate
                loss.backward()
            if not last:
                continue
            opt.step()
            opt.zero_grad()
            done += 1
            if done == 5:
                began = time.perf_counter()
            if done >= args.steps:
                break
        rate = (done - 5) / (time.perf_counter() - began) if done > 5 else 0.0
        print(f"JOB rank={rank} steps={done} steps_per_s={rate:.2f}", flush=True)
        if not args.fsdp:  # what training made of the weights, to the last bit
            total = sum(float(p.detach().double().sum()) for p in model.parameters())
            print(f"JOB weights rank={rank} sum={total!r}", flush=True)
    finally:
        print(f"JOB end rank={rank}", flush=True)
        dist.destroy_process_group()


def build(args: argparse.Namespace, device: torch.device) -> torch.nn.Module:
    """An MLP, wrapped in DDP or sharded with FSDP2's fully_shard (each layer, then the whole)."""
    hidden = [m for _ in range(2) for m in (torch.nn.Linear(args.dim, args.dim), torch.nn.ReLU())]
    net = torch.nn.Sequential(*hidden, torch.nn.Linear(args.dim, 1)).to(device)
    if args.fsdp:
        from torch.distributed.fsdp import fully_shard

        for layer in net:
            if isinstance(layer, torch.nn.Linear):
                fully_shard(layer)
        fully_shard(net)
        return net
    return torch.nn.parallel.DistributedDataParallel(net)


def _batches(loader: DataLoader[tuple[torch.Tensor, torch.Tensor]]) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """Epoch after epoch."""
    sampler = loader.sampler
    for epoch in range(1 << 30):
        if isinstance(sampler, DistributedSampler):
            sampler.set_epoch(epoch)
        yield from loader


class _nothing:  # noqa: N801 - a context manager that does nothing (contextlib.nullcontext, as users write it)
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


if __name__ == "__main__":
    main()
