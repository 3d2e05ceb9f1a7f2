"""A user's training script with phases, as users write them: a slow start, steps of a known length,
an evaluation pass over a second loader every N steps, a checkpoint (``torch.save``) every M steps,
a slow exit; or a hang on a lock (in the loop, or in a DataLoader worker). It times itself — its
training seconds are its steps' own, evaluation and checkpoints left out — and prints them last:
``JOB steps=… train_s=… eval_s=… ckpt_s=… steps_per_s=…``. A test can end the hang on the lock when
it has seen what it waits for (``--release-file``), and stop the job with SIGINT and still get its
line (``--say-when-stopped``).
"""

from __future__ import annotations

import argparse
import io
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import torch
from torch.utils.data import DataLoader, Dataset, TensorDataset


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=24)
    p.add_argument("--step-s", type=float, default=0.5, help="seconds of 'work' a step")
    p.add_argument("--eval-every", type=int, default=0)
    p.add_argument("--eval-batches", type=int, default=6)
    p.add_argument("--eval-batch-s", type=float, default=0.1)
    p.add_argument("--eval-mode-only", action="store_true", help="evaluate without a loader: model.eval() … train()")
    p.add_argument("--save-every", type=int, default=0)
    p.add_argument("--save-s", type=float, default=0.6, help="seconds a checkpoint takes to write")
    p.add_argument("--start-s", type=float, default=0.0, help="seconds of set-up before the first step")
    p.add_argument("--exit-s", type=float, default=0.0, help="seconds after the last step before the exit")
    p.add_argument("--no-loader", action="store_true", help="batches made in the loop, no DataLoader")
    p.add_argument("--workers", type=int, default=0)
    p.add_argument("--hang-at", type=int, default=0, help="block on a lock at this step (for ever, or --hang-s)")
    p.add_argument("--hang-s", type=float, default=-1, help="seconds the lock holds it (-1: for ever)")
    p.add_argument("--hang-in-worker", action="store_true", help="... in a DataLoader worker's __getitem__")
    p.add_argument("--own-handlers", action="store_true", help="install signal handlers and watch its threads")
    p.add_argument("--release-file", default="", help="the lock holds until this file exists (tried each --hang-s)")
    p.add_argument("--say-when-stopped", action="store_true", help="SIGINT: stop after the step, print the line")
    return p.parse_args()


class SlowFile(io.BytesIO):
    """A checkpoint file on slow storage: its first write takes ``seconds``."""

    def __init__(self, seconds: float) -> None:
        super().__init__()
        self.seconds = seconds

    def write(self, data: bytes) -> int:  # type: ignore[override]
        time.sleep(self.seconds)
        self.seconds = 0.0
        return super().write(data)


class Hanging(Dataset[tuple[torch.Tensor, torch.Tensor]]):
    """A dataset whose 40th item never comes (a dead network mount, say)."""

    def __init__(self) -> None:
        self.x, self.y = torch.randn(4096, 16), torch.randn(4096, 1)

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        if i == 40:
            time.sleep(3600)  # the worker hangs here
        return self.x[i], self.y[i]


def batches(args: argparse.Namespace, data: Dataset[tuple[torch.Tensor, torch.Tensor]]) -> Iterator[Any]:
    if args.no_loader:
        while True:
            yield torch.randn(16, 16), torch.randn(16, 1)
    while True:
        yield from DataLoader(data, batch_size=16, num_workers=args.workers)


def evaluate(model: torch.nn.Module, val: Any, args: argparse.Namespace) -> float:
    """An evaluation pass (over a loader of its own, or ``--eval-mode-only`` batches made here); its seconds."""
    t = time.monotonic()
    model.eval()
    with torch.no_grad():
        if args.eval_mode_only:
            for _ in range(args.eval_batches):
                model(torch.randn(64, 16))
                time.sleep(args.eval_batch_s)
        else:
            for vx, _ in DataLoader(val, batch_size=512 // args.eval_batches):
                model(vx)
                time.sleep(args.eval_batch_s)
    model.train()
    return time.monotonic() - t


def when_stopped(args: argparse.Namespace) -> threading.Event:
    """Set at SIGINT with ``--say-when-stopped``: the loop ends after its step and prints its line."""
    stopped = threading.Event()
    if args.say_when_stopped:
        signal.signal(signal.SIGINT, lambda *_: stopped.set())
    return stopped


def main() -> int:
    args = parse()
    time.sleep(args.start_s)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    data: Any = Hanging() if args.hang_in_worker else TensorDataset(torch.randn(4096, 16), torch.randn(4096, 1))
    val = TensorDataset(torch.randn(512, 16), torch.randn(512, 1))
    seen_threads: list[int] = []
    handlers = [(signal.signal(s, lambda *_: None), signal.getsignal(s))[1] for s in (signal.SIGUSR1, signal.SIGUSR2)]
    handlers = handlers if args.own_handlers else []
    (lock := threading.Lock()).acquire()  # held: a hang waits on it
    stopped = when_stopped(args)
    train_s = eval_s = ckpt_s = 0.0
    last_end = time.monotonic()
    steps = 0
    try:  # its line in a finally: also when gpudash ends the run at a step (SystemExit)
        for x, y in batches(args, data):
            if args.hang_at and steps + 1 == args.hang_at:
                hung = time.monotonic()
                # the job hangs here: nobody releases it (a test may say when it may go on, by a file)
                while not lock.acquire(timeout=args.hang_s) and args.release_file:
                    if os.path.exists(args.release_file):
                        break
                last_end += time.monotonic() - hung  # its own figure: the hang is not training
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
            if args.own_handlers:
                seen_threads.append(threading.active_count())
            if args.eval_every and steps % args.eval_every == 0:
                took = evaluate(model, val, args)
                eval_s += took
                last_end += took
            if args.save_every and steps % args.save_every == 0:
                t = time.monotonic()
                torch.save(model.state_dict(), SlowFile(args.save_s))
                ckpt_s += time.monotonic() - t
                last_end += time.monotonic() - t
            if steps >= args.steps or stopped.is_set():
                break
    finally:
        if args.own_handlers and len(set(seen_threads)) != 1:
            print(f"JOB threads changed: {sorted(set(seen_threads))}", flush=True)
        if handlers and handlers != [signal.getsignal(signal.SIGUSR1), signal.getsignal(signal.SIGUSR2)]:
            print("JOB its signal handlers changed", flush=True)
        print(
            f"JOB steps={steps} train_s={train_s:.4f} eval_s={eval_s:.4f} ckpt_s={ckpt_s:.4f} "
            f"steps_per_s={(steps - 1) / train_s:.4f} pid={os.getpid()}",
            flush=True,
        )
    time.sleep(args.exit_s)
    return 0


if __name__ == "__main__":
    sys.exit(main())
