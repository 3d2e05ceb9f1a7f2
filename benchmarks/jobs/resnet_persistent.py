"""A user's ResNet-50 training script as many are written: a DataLoader with persistent workers and
pinned memory over synthetic uint8 images (augmented on the CPU: a flip), bf16 autocast and
channels_last, an evaluation pass every ``--eval-every`` steps, a checkpoint every
``--save-every``. It times its own steps with CUDA events — one at each step's end; a step's time
is the time between two, evaluation and checkpoints left out, its first ``--warmup`` steps too —
and prints them last: ``JOB steps=… train_s=… steps_per_s=… samples_per_s=…``. Its persistent
workers make its exit slow, as they do bare."""

from __future__ import annotations

import argparse
import os
import sys
import tempfile

import torch
import torchvision
from torch.utils.data import DataLoader


class Images(torch.utils.data.Dataset[tuple[torch.Tensor, int]]):
    """``n`` synthetic 224×224 uint8 images (a few distinct ones, flipped at random: CPU work)."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.pool = torch.randint(0, 256, (16, 3, 224, 224), dtype=torch.uint8)

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        image = self.pool[i % 16]
        return (image.flip(-1) if i % 2 else image), i % 1000


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--workers", type=int, default=8)
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--eval-every", type=int, default=100)
    p.add_argument("--save-every", type=int, default=150)
    args = p.parse_args()
    device = torch.device("cuda")
    torch.backends.cudnn.benchmark = True
    model = torchvision.models.resnet50().to(device, memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    mean = torch.tensor([0.485, 0.456, 0.406], device=device).view(1, 3, 1, 1) * 255
    kw = {"num_workers": args.workers, "persistent_workers": True, "pin_memory": True}
    train = DataLoader(Images(args.batch * args.steps), batch_size=args.batch, shuffle=True, drop_last=True, **kw)
    val = DataLoader(Images(args.batch * 8), batch_size=args.batch, **kw)

    def prepare(images: torch.Tensor) -> torch.Tensor:
        x = images.to(device, non_blocking=True).to(memory_format=torch.channels_last)
        return (x.float() - mean) / 64.0

    ends: list[torch.cuda.Event] = []  # each step's end; None-free pairs are the timed steps
    skip: set[int] = set()  # steps whose interval holds evaluation or a checkpoint
    folder = tempfile.mkdtemp(prefix="resnet-ckpt-")
    for step, (images, labels) in enumerate(train, 1):
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = torch.nn.functional.cross_entropy(model(prepare(images)), labels.to(device, non_blocking=True))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        end = torch.cuda.Event(enable_timing=True)
        end.record()
        ends.append(end)
        if args.eval_every and step % args.eval_every == 0:
            model.eval()
            with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
                for images, _ in val:
                    model(prepare(images))
            model.train()
            skip.add(step + 1)
        if args.save_every and step % args.save_every == 0:
            torch.save({"model": model.state_dict(), "opt": opt.state_dict()}, os.path.join(folder, "ckpt.pt"))
            skip.add(step + 1)
        if step >= args.steps:
            break
    torch.cuda.synchronize()
    timed = [(i + 1, ends[i - 1].elapsed_time(ends[i]) / 1e3) for i in range(args.warmup, len(ends))]
    timed = [(step, s) for step, s in timed if step not in skip]
    train_s = sum(s for _, s in timed)
    rate = len(timed) / train_s
    print(
        f"JOB steps={len(ends)} timed_steps={len(timed)} train_s={train_s:.4f} steps_per_s={rate:.4f} "
        f"samples_per_s={rate * args.batch:.3f}",
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
