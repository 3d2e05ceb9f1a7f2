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


class OwnClock:
    """The script's own account: a step's training time runs from the previous step's end to its own,
    less what was set aside between them (a checkpoint's work, the idle stretches)."""

    def __init__(self) -> None:
        self.steps = 0
        self.train_s = 0.0
        self.set_aside_s = {"ckpt": 0.0, "idle": 0.0}
        self.last_end = time.monotonic()

    def step_ended(self) -> float:
        now = time.monotonic()
        self.steps += 1
        if self.steps > 1:  # the first step's time is start-up: left out
            self.train_s += now - self.last_end
        self.last_end = now
        return now

    def set_aside(self, what: str, since: float) -> None:
        took = time.monotonic() - since
        self.set_aside_s[what] += took
        self.last_end += took

    def line(self) -> str:
        aside = " ".join(f"{what}_s={s:.4f}" for what, s in self.set_aside_s.items())
        rate = (self.steps - 1) / self.train_s
        return f"JOB steps={self.steps} train_s={self.train_s:.4f} {aside} steps_per_s={rate:.4f}"


def main() -> int:
    args = parse()
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    clock = OwnClock()
    for x, y in batches(args.no_loader):
        (model(x) - y).pow(2).mean().backward()
        time.sleep(args.step_s)
        optimizer.step()
        optimizer.zero_grad()
        ended = clock.step_ended()
        if clock.steps >= args.steps:
            break
        if args.save_every and clock.steps % args.save_every == 0:
            torch.save(model.state_dict(), io.BytesIO())  # quick: well under 50 ms
            time.sleep(args.after_save_s)  # the upload, the barrier: the checkpoint's too
            clock.set_aside("ckpt", ended)
        elif args.idle_every and clock.steps % args.idle_every == 0:
            time.sleep(args.idle_s)  # neither training nor a checkpoint
            clock.set_aside("idle", ended)
    print(clock.line(), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
