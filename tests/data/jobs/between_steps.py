"""A user's training script that does more between its steps than training, none of it where a hook
sees it: every ``--save-every`` steps a quick ``torch.save`` followed by ``--after-save-s`` seconds
of the checkpoint's other work (an upload, a barrier: a sleep), and every ``--idle-every`` steps
``--idle-s`` seconds of other work with no save at all. Its steps are a small model's forward and
backward and ``--step-s`` seconds of "work"; its batches come from a ``DataLoader``, or
(``--no-loader``) are made in the loop. It times itself — its training seconds are its steps' own —
and prints them last: ``JOB steps=… train_s=… ckpt_s=… idle_s=… steps_per_s=…``.
"""

from __future__ import annotations

import argparse
import io
import sys
import time
from collections.abc import Iterator
from typing import Any

import torch
from torch.utils.data import DataLoader, TensorDataset


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--step-s", type=float, default=0.08, help="seconds of 'work' a step")
    p.add_argument("--save-every", type=int, default=0)
    p.add_argument("--after-save-s", type=float, default=0.5, help="seconds of checkpoint work after the save")
    p.add_argument("--idle-every", type=int, default=0)
    p.add_argument("--idle-s", type=float, default=0.5, help="seconds of other work between two steps")
    p.add_argument("--no-loader", action="store_true", help="batches made in the loop, no DataLoader")
    return p.parse_args()


def batches(no_loader: bool) -> Iterator[Any]:
    data = TensorDataset(torch.randn(4096, 16), torch.randn(4096, 1))
    while True:
        if no_loader:
            yield torch.randn(16, 16), torch.randn(16, 1)
        else:
            yield from DataLoader(data, batch_size=16)


def main() -> int:
    args = parse()
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    train_s = ckpt_s = idle_s = 0.0
    last_end = time.monotonic()
    steps = 0
    for x, y in batches(args.no_loader):
        loss = (model(x) - y).pow(2).mean()
        loss.backward()
        time.sleep(args.step_s)
        optimizer.step()
        optimizer.zero_grad()
        steps += 1
        now = time.monotonic()
        if steps > 1:
            train_s += now - last_end
        last_end = now
        if steps >= args.steps:
            break
        if args.save_every and steps % args.save_every == 0:
            torch.save(model.state_dict(), io.BytesIO())  # quick: well under 50 ms
            time.sleep(args.after_save_s)  # the upload, the barrier: the checkpoint's too
            took = time.monotonic() - now
            ckpt_s += took
            last_end += took
        elif args.idle_every and steps % args.idle_every == 0:
            time.sleep(args.idle_s)  # neither training nor a checkpoint
            took = time.monotonic() - now
            idle_s += took
            last_end += took
    print(
        f"JOB steps={steps} train_s={train_s:.4f} ckpt_s={ckpt_s:.4f} idle_s={idle_s:.4f} "
        f"steps_per_s={(steps - 1) / train_s:.4f}",
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
