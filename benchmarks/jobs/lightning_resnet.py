"""A user's Lightning script on a GPU, as people write one: a torchvision ResNet in a
``LightningModule``, bf16 mixed precision, a DataLoader of synthetic images on the host, a validation
loop every ``--val-every`` steps and a checkpoint every ``--save-every``. A callback (the tests'
Lightning script's, ``tests/data/jobs/lightning_val.py``) times the training on the host's clock: a
batch's end to the next, its validation loops and saves left out. The script prints it last:
``JOB steps=… train_s=… eval_s=… steps_per_s=…``.

``python benchmarks/jobs/lightning_resnet.py --steps 600 --val-every 200 --save-every 300``
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile

import lightning as L
import torch
import torchvision
from lightning.pytorch.callbacks import ModelCheckpoint
from torch.utils.data import DataLoader, TensorDataset

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "data", "jobs"))
from lightning_val import StepClock  # type: ignore[import-not-found]  # noqa: E402 - the tests' Lightning script's clock


class Classifier(L.LightningModule):
    def __init__(self, model: str, classes: int) -> None:
        super().__init__()
        self.net = getattr(torchvision.models, model)(num_classes=classes)

    def training_step(self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int) -> torch.Tensor:
        x, y = batch
        loss = torch.nn.functional.cross_entropy(self.net(x), y)
        self.log("train_loss", loss)
        return loss

    def validation_step(self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int) -> None:
        x, y = batch
        self.log("val_loss", torch.nn.functional.cross_entropy(self.net(x), y))

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.1, momentum=0.9)


# the script's whole-number options and their defaults
NUMBERS = {
    "steps": 600,
    "batch": 128,
    "image-size": 128,
    "val-every": 200,
    "val-batches": 20,
    "save-every": 300,
    "samples": 4096,
}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--model", default="resnet18")
    for name, default in NUMBERS.items():
        p.add_argument(f"--{name}", type=int, default=default)
    args = p.parse_args()
    torch.manual_seed(0)
    images = torch.randn(args.samples, 3, args.image_size, args.image_size)
    labels = torch.randint(0, 100, (args.samples,))
    train = DataLoader(TensorDataset(images, labels), batch_size=args.batch, shuffle=True, drop_last=True)
    val = DataLoader(
        TensorDataset(images[: args.batch * args.val_batches], labels[: args.batch * args.val_batches]),
        batch_size=args.batch,
    )
    clock = StepClock()
    cuda = torch.cuda.is_available()
    saves = ModelCheckpoint(dirpath=tempfile.mkdtemp(prefix="lightning-ckpt-"), every_n_train_steps=args.save_every)
    trainer = L.Trainer(
        max_steps=args.steps,
        accelerator="gpu" if cuda else "cpu",
        devices=1,
        precision="bf16-mixed" if cuda else "32-true",
        logger=False,
        enable_model_summary=False,
        enable_progress_bar=False,
        val_check_interval=args.val_every,
        check_val_every_n_epoch=None,
        num_sanity_val_steps=0,
        callbacks=[clock, saves],
    )
    trainer.fit(Classifier(args.model, 100), train, val)
    rate = clock.steps / clock.train_s if clock.train_s else 0.0
    print(
        f"JOB steps={trainer.global_step} train_s={clock.train_s:.4f} eval_s={clock.eval_s:.4f} steps_per_s={rate:.4f}",
        flush=True,
    )


if __name__ == "__main__":
    main()
