"""A user's loop whose Dataset cannot run in DataLoader worker processes (a file handle it will
not share): under ``--set num_workers=N`` it fails with its own error; as written it trains."""

from __future__ import annotations

import sys

import torch
from torch.utils.data import DataLoader, Dataset, get_worker_info


class Reads(Dataset[tuple[torch.Tensor, torch.Tensor]]):
    def __len__(self) -> int:
        return 10**6

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        if get_worker_info() is not None:
            raise RuntimeError("this dataset's file handle cannot be shared with worker processes")
        return torch.randn(8), torch.randn(1)


def main() -> int:
    model = torch.nn.Linear(8, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for x, y in DataLoader(Reads(), batch_size=16):
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return 0


if __name__ == "__main__":
    sys.exit(main())
