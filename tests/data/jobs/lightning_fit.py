"""A user's Lightning script: a LightningModule and Trainer.fit, on the CPU (its progress bar on)."""

from __future__ import annotations

import sys

import lightning as L
import torch
from torch.utils.data import DataLoader, TensorDataset


class Regressor(L.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.net = torch.nn.Linear(16, 1)

    def training_step(self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int) -> torch.Tensor:
        x, y = batch
        return torch.nn.functional.mse_loss(self.net(x), y)

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.01)


def main() -> int:
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 30
    torch.manual_seed(0)
    data = DataLoader(TensorDataset(torch.randn(2048, 16), torch.randn(2048, 1)), batch_size=8, num_workers=0)
    trainer = L.Trainer(max_steps=steps, accelerator="cpu", devices=1, logger=False, enable_checkpointing=False)
    trainer.fit(Regressor(), data)
    print(f"JOB global_step={trainer.global_step}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
