"""A user's Lightning script with a validation loop: ``val_check_interval`` steps apart, a few
validation batches each; its steps and validation batches take known time. A callback of its own
times its training steps (batch end to batch end, validation left out) and its validation loops,
and it prints them last: ``JOB steps=… train_s=… eval_s=… steps_per_s=…``."""

from __future__ import annotations

import sys
import time
from typing import Any

import lightning as L
import torch
from torch.utils.data import DataLoader, TensorDataset

STEP_S, VAL_BATCH_S = 0.1, 0.1


class Regressor(L.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))

    def training_step(self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int) -> torch.Tensor:
        x, y = batch
        time.sleep(STEP_S)
        return torch.nn.functional.mse_loss(self.net(x), y)

    def validation_step(self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int) -> None:
        x, y = batch
        time.sleep(VAL_BATCH_S)
        self.log("val_loss", torch.nn.functional.mse_loss(self.net(x), y))

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.01)


class StepClock(L.Callback):
    """The script's own training time: a batch's end to the next, its validation loops and its saves
    left out (each one's end starts the next step's time); and its validation loops' time."""

    def __init__(self) -> None:
        self.last: float | None = None
        self.train_s = self.eval_s = 0.0
        self.steps = 0
        self.eval_t = 0.0

    def on_train_batch_end(self, *args: Any, **kw: Any) -> None:
        now = time.monotonic()
        if self.last is not None:
            self.train_s += now - self.last
            self.steps += 1
        self.last = now

    def on_validation_start(self, *args: Any, **kw: Any) -> None:
        self.eval_t = time.monotonic()

    def on_validation_end(self, *args: Any, **kw: Any) -> None:
        self.last = time.monotonic()
        self.eval_s += self.last - self.eval_t

    def on_save_checkpoint(self, *args: Any, **kw: Any) -> None:
        self.last = None  # the save's own time is not a training step's


def main() -> int:
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 40
    torch.manual_seed(0)
    train = DataLoader(TensorDataset(torch.randn(4096, 16), torch.randn(4096, 1)), batch_size=8)
    val = DataLoader(TensorDataset(torch.randn(48, 16), torch.randn(48, 1)), batch_size=8)
    clock = StepClock()
    trainer = L.Trainer(
        max_steps=steps,
        accelerator="cpu",
        devices=1,
        logger=False,
        enable_checkpointing=False,
        enable_model_summary=False,
        enable_progress_bar=False,
        val_check_interval=10,
        num_sanity_val_steps=0,
        callbacks=[clock],
    )
    trainer.fit(Regressor(), train, val)
    rate = clock.steps / clock.train_s if clock.train_s else 0.0
    print(
        f"JOB steps={trainer.global_step} train_s={clock.train_s:.4f} eval_s={clock.eval_s:.4f} steps_per_s={rate:.4f}",
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
