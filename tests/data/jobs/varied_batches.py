"""A user's job whose batches vary in size (a bucketing sampler: 8 to 256 samples, the smallest
first), through a DataLoader's ``batch_sampler``; an MLP trained with SGD. On its last line
``JOB largest=N`` (its largest batch).

``python varied_batches.py --rounds 12``
"""

from __future__ import annotations

import argparse

import torch
from torch.utils.data import DataLoader, TensorDataset

SIZES = (8, 64, 16, 128, 32, 256)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=12)
    args = parser.parse_args()
    model = torch.nn.Sequential(torch.nn.Linear(128, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    data = TensorDataset(torch.randn(max(SIZES), 128))
    batches = [list(range(size)) for _ in range(args.rounds) for size in SIZES]
    for (x,) in DataLoader(data, batch_sampler=batches):
        loss = model(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    print(f"JOB largest={max(SIZES)}", flush=True)


if __name__ == "__main__":
    main()
