"""A user's loop whose Dataset waits on reads (a sleep per sample, as storage or the network
would), with no DataLoader workers and pinned memory: input-bound on any machine.
``slow_reads.py [--steps N] [--workers K] [--read-ms MS] [--random-draws]``; prints its loaders' worker counts, then
``JOB steps=N samples_per_s=X loss=L`` (the last step's: the same whatever its loader's settings)."""

from __future__ import annotations

import argparse
import sys
import time

import torch
from torch.utils.data import DataLoader, Dataset


class SlowReads(Dataset[tuple[torch.Tensor, torch.Tensor]]):
    """Each sample waits ``read_s`` before it is there (a read, not CPU work)."""

    def __init__(self, n: int, read_s: float, random_draws: bool = False) -> None:
        self.n, self.read_s, self.random_draws = n, read_s, random_draws

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        time.sleep(self.read_s)
        g = torch.Generator().manual_seed(i)
        x = torch.randn(16, generator=g)
        if self.random_draws:  # a per-sample augmentation from the global generator
            x = x + 0.01 * torch.rand(16)
        return x, torch.randn(1, generator=g)


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--workers", type=int, default=0)
    p.add_argument("--read-ms", type=float, default=1.0, help="how long each sample's read waits")
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--random-draws", action="store_true", help="each sample draws from torch's global generator")
    args = p.parse_args()
    torch.manual_seed(0)
    loader = DataLoader(
        SlowReads(10**6, args.read_ms / 1000, args.random_draws),
        batch_size=args.batch,
        num_workers=args.workers,
        pin_memory=True,
    )
    evaluation = DataLoader(SlowReads(64, 0.0), batch_size=16)  # made apart: --set leaves it as it is
    print(
        f"JOB loaders train_workers={loader.num_workers} eval_workers={evaluation.num_workers} "
        f"eval_batch={evaluation.batch_size}",
        flush=True,
    )
    model = torch.nn.Linear(16, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    began, done = time.monotonic(), 0
    loss = torch.zeros(())
    for done, (x, y) in enumerate(loader, 1):
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if done >= args.steps:
            break
    seconds = time.monotonic() - began
    print(f"JOB steps={done} samples_per_s={done * args.batch / seconds:.1f} loss={loss.item():.9g}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
