"""A user's first script: a small model on an in-memory ``TensorDataset`` through a ``DataLoader``
with no workers, batch 64, on the CPU: its Dataset's ``__getitem__`` is a tensor index, cheaper
than a worker's hand-over of a batch. ``in_memory.py [--steps N]``; prints ``JOB steps=N``."""

from __future__ import annotations

import argparse
import sys

import torch
from torch.utils.data import DataLoader, TensorDataset


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=400)
    args = p.parse_args()
    torch.manual_seed(0)
    data = TensorDataset(torch.randn(64 * 100, 32), torch.randint(0, 10, (64 * 100,)))
    loader = DataLoader(data, batch_size=64, shuffle=True)
    model = torch.nn.Linear(32, 10)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    steps = 0
    while steps < args.steps:
        for x, y in loader:
            torch.nn.functional.cross_entropy(model(x), y).backward()
            optimizer.step()
            optimizer.zero_grad()
            steps += 1
            if steps >= args.steps:
                break
    print(f"JOB steps={steps}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
