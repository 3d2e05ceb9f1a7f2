"""A user's ResNet-50 training script as many are written: a DataLoader with persistent workers and
pinned memory over synthetic uint8 images (augmented on the CPU: a flip), bf16 autocast and
channels_last, an evaluation pass every ``--eval-every`` steps, a checkpoint every
``--save-every``. It times its own steps with CUDA events — one at each step's end; a step's time
is the time between two, evaluation and checkpoints left out, its first ``--warmup`` steps too —
and prints them last: ``JOB steps=… train_s=… steps_per_s=… samples_per_s=…``. Its persistent
workers make its exit slow, as they do bare.

``--ready-images``: an input that is a hand-over, not work — ready-made fp16 images (indexing
only), each batch handed over by the workers through shared memory, copied by the pin-memory
thread and by the step to the GPU (77 MB a batch of 256). Issue 74's hand-over job:
``python resnet_persistent.py --ready-images --batch 256 --workers 4 --warmup 20 --eval-every 0
--save-every 0 --steps 400``
"""

from __future__ import annotations

import os
import sys
import tempfile

import torch
import torchvision
from torch.utils.data import DataLoader

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
from benchmarks.jobs.resnet_job import job_args  # noqa: E402 - the repository's root first


class Images(torch.utils.data.Dataset[tuple[torch.Tensor, int]]):
    """``n`` synthetic 224×224 images: a few distinct uint8 ones, flipped at random (CPU work), or
    ``ready``, 64 fp16 ones handed out as they are (a sample costs an index, nothing more)."""

    def __init__(self, n: int, ready: bool = False) -> None:
        self.n, self.ready = n, ready
        if ready:
            self.pool = torch.randn(64, 3, 224, 224).half()
        else:
            self.pool = torch.randint(0, 256, (16, 3, 224, 224), dtype=torch.uint8)

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        image = self.pool[i % len(self.pool)]
        return (image.flip(-1) if i % 2 and not self.ready else image), i % 1000


def main() -> int:
    args = job_args("ready_images", steps=300, batch=128, workers=8, warmup=10, eval_every=100, save_every=150)
    device = torch.device("cuda")
    torch.backends.cudnn.benchmark = True
    model = torchvision.models.resnet50().to(device, memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    mean = torch.tensor([0.485, 0.456, 0.406], device=device).view(1, 3, 1, 1) * 255
    kw = {"num_workers": args.workers, "persistent_workers": args.workers > 0, "pin_memory": True}
    train_set = Images(args.batch * args.steps, args.ready_images)
    train = DataLoader(train_set, batch_size=args.batch, shuffle=True, drop_last=True, **kw)
    val = DataLoader(Images(args.batch * 8, args.ready_images), batch_size=args.batch, **kw)

    def prepare(images: torch.Tensor) -> torch.Tensor:
        x = images.to(device, non_blocking=True).to(memory_format=torch.channels_last)
        return x if args.ready_images else (x.float() - mean) / 64.0

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
