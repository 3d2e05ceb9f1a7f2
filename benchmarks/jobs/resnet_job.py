"""A user's ResNet-50 training script (torchvision), bf16 autocast and channels_last, as the job
gpudash measures in the ``job_overhead`` case: a DataLoader over synthetic images made on the
GPU once (so the input is not what bounds it), its own timing of its steps on its last line."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Iterable
from typing import Any

import torch
from torch.utils.data import DataLoader


class SameBatch(torch.utils.data.Dataset):
    """One batch of synthetic images, made on the GPU once and handed out ``steps`` times: the
    job's DataLoader, with nothing to load."""

    def __init__(self, batch: int, steps: int, device: torch.device) -> None:
        self.images = torch.randn(batch, 3, 224, 224, device=device).to(memory_format=torch.channels_last)
        self.labels = torch.randint(0, 1000, (batch,), device=device)
        self.steps = steps

    def __len__(self) -> int:
        return self.steps

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.images, self.labels


def classifier_step(
    model: torch.nn.Module, opt: torch.optim.Optimizer, device: torch.device
) -> Callable[[tuple[torch.Tensor, torch.Tensor]], None]:
    """One training step of an image classifier under bf16 autocast, on a batch of (images, labels)."""

    def step(batch: tuple[torch.Tensor, torch.Tensor]) -> None:
        images, labels = batch
        with torch.autocast(device.type, dtype=torch.bfloat16):
            loss = torch.nn.functional.cross_entropy(model(images), labels)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    return step


def timed_loop(
    step: Callable[[Any], None], batches: Iterable[Any], steps: int, warmup: int, device: torch.device
) -> float:
    """``step`` over ``batches`` (again, epoch after epoch, until ``steps``); the seconds of the
    steps after the first ``warmup``, the GPU's work done (synchronized at both ends)."""
    done, start = 0, 0.0
    while done < steps:
        for batch in batches:
            step(batch)
            done += 1
            if done == warmup:
                if device.type == "cuda":
                    torch.cuda.synchronize()
                start = time.perf_counter()
            if done >= steps:
                break
    if device.type == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter() - start


def job_args(*switches: str, **defaults: int) -> argparse.Namespace:
    """The job's options: each of ``defaults`` a ``--NAME N``, a whole number with that default;
    each of ``switches`` a ``--NAME`` that takes no value (off unless given). A ``_`` in a name is a
    ``-`` on the command line (``eval_every``: ``--eval-every``)."""
    p = argparse.ArgumentParser()
    for name in switches:
        p.add_argument(f"--{name.replace('_', '-')}", action="store_true")
    for name, default in defaults.items():
        p.add_argument(f"--{name.replace('_', '-')}", type=int, default=default)
    return p.parse_args()


def report(steps: int, warmup: int, batch: int, took: float) -> None:
    """The job's last line: its steps, those it timed (after ``warmup``), their seconds and samples/s."""
    timed = steps - warmup
    print(f"JOB steps={steps} timed_steps={timed} seconds={took:.6f} samples_per_s={timed * batch / took:.3f}")


class Spread(torch.nn.Module):
    """``--item-break``: the model's logits scaled by a float read off them (``.item()``), a graph
    break in a compiled forward — and a new float at every step, which dynamo takes as a constant."""

    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        logits = self.model(images)
        spread = logits.float().std().item()
        return logits / (1.0 + spread)


def varied(
    loader: Iterable[tuple[torch.Tensor, torch.Tensor]], every: int
) -> Iterable[tuple[torch.Tensor, torch.Tensor]]:
    """``--vary-every N``: every N steps the batch is 8 images shorter, over 8 lengths in turn."""
    for i, (images, labels) in enumerate(loader):
        n = len(images) - 8 * ((i // every) % 8) if every else len(images)
        yield images[:n], labels[:n]


def main() -> int:
    import torchvision  # here, not at the top: small_job.py takes this module's loop, not its model

    args = job_args("compile", "static", "item_break", steps=120, batch=256, warmup=20, vary_every=0)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    torch.backends.cudnn.benchmark = True
    model = torchvision.models.resnet50().to(device, memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    trained: torch.nn.Module = Spread(model) if args.item_break else model
    if args.compile:  # inductor; --static: every new batch length compiles again
        trained = torch.compile(trained, dynamic=False if args.static else None)  # type: ignore[assignment]
    loader = DataLoader(SameBatch(args.batch, args.steps, device), batch_size=None)
    batches = varied(loader, args.vary_every) if args.vary_every else loader
    took = timed_loop(classifier_step(trained, opt, device), batches, args.steps, args.warmup, device)
    report(args.steps, args.warmup, args.batch, took)
    return 0


if __name__ == "__main__":
    sys.exit(main())
