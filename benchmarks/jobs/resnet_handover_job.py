"""A user's ResNet-50 script whose input is a hand-over, not work: an in-memory Dataset of
ready-made fp16 images (indexing only), batches of 256, 4 persistent DataLoader workers with pinned
memory, bf16 autocast and channels_last on the GPU. Each batch is 77 MB that the workers hand over
through shared memory, the pin-memory thread copies and the step copies to the GPU. It prints its
own rate last: ``JOB steps=N samples_per_s=X``.

``python resnet_handover_job.py --steps 400``
"""

from __future__ import annotations

import argparse
import time

import torch
import torchvision
from torch.utils.data import DataLoader, Dataset


class ReadyImages(Dataset[tuple[torch.Tensor, int]]):
    """``n`` samples drawn from 64 ready fp16 images: a sample costs an index, nothing more."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.pool = torch.randn(64, 3, 224, 224).half()

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        return self.pool[i % 64], i % 1000


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=400)
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--workers", type=int, default=4)
    args = p.parse_args()
    device = torch.device("cuda")
    torch.backends.cudnn.benchmark = True
    model = torchvision.models.resnet50().to(device, memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    loader = DataLoader(
        ReadyImages(1 << 20),
        batch_size=args.batch,
        shuffle=True,
        num_workers=args.workers,
        pin_memory=True,
        persistent_workers=args.workers > 0,
    )
    done, began = 0, 0.0
    for x, y in loader:
        x = x.to(device, non_blocking=True).to(memory_format=torch.channels_last)
        y = y.to(device, non_blocking=True)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        done += 1
        if done == 20:
            torch.cuda.synchronize()
            began = time.perf_counter()
        if done >= args.steps:
            break
    torch.cuda.synchronize()
    rate = (done - 20) * args.batch / (time.perf_counter() - began)
    print(f"JOB steps={done} samples_per_s={rate:.1f}", flush=True)


if __name__ == "__main__":
    main()
