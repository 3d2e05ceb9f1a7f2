"""A user's ResNet-18 training script whose Dataset decodes and augments each image on the CPU
(torchvision's v2 transforms: a random resized crop, a flip, colour jitter), with no DataLoader
workers and pinned memory: input-bound on a GPU until the workers are many. Written as a user
writes one, not for gpudash; the ``tune_job_check`` case races ``gpudash tune`` on it.

    python cpu_augment_job.py [--workers K] [--batch 64] [--seconds S] [--warmup-steps 20]

Its last line: ``JOB steps=N samples_per_s=X`` over the steps after the warm-up (its own clock).
"""

from __future__ import annotations

import argparse
import sys
import time

import torch
import torchvision
from torch.utils.data import DataLoader, Dataset
from torchvision.transforms import v2


class AugmentedImages(Dataset[tuple[torch.Tensor, int]]):
    """Synthetic 256-pixel images (as a decoder would give them), augmented per sample on the CPU."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.augment = v2.Compose(
            [
                v2.RandomResizedCrop(224, antialias=True),
                v2.RandomHorizontalFlip(),
                v2.ColorJitter(0.4, 0.4, 0.4),
                v2.ToDtype(torch.float32, scale=True),
                v2.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225]),
            ]
        )

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        g = torch.Generator().manual_seed(i)
        image = torch.randint(0, 256, (3, 256, 256), dtype=torch.uint8, generator=g)
        return self.augment(image), i % 1000


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--workers", type=int, default=0)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--seconds", type=float, default=30.0)
    p.add_argument("--warmup-steps", type=int, default=20)
    args = p.parse_args()
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    loader = DataLoader(
        AugmentedImages(10**7), batch_size=args.batch, shuffle=True, num_workers=args.workers, pin_memory=True
    )
    model = torchvision.models.resnet18(num_classes=1000).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss()
    steps, began, start = 0, time.monotonic(), 0.0
    for images, labels in loader:
        images, labels = images.to(device, non_blocking=True), labels.to(device, non_blocking=True)
        loss = loss_fn(model(images), labels)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        steps += 1
        if steps == args.warmup_steps:
            if device.type == "cuda":
                torch.cuda.synchronize()
            start = time.monotonic()
        if time.monotonic() - began >= args.seconds and steps > args.warmup_steps:
            break
    if device.type == "cuda":
        torch.cuda.synchronize()
    timed = steps - args.warmup_steps
    rate = timed * args.batch / (time.monotonic() - start) if timed > 0 else 0.0
    print(f"JOB steps={steps} samples_per_s={rate:.1f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
