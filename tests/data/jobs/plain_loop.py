"""A user's plain training loop, as users write it: its own argument parser, a DataLoader with
workers, and options for two optimizers in one iteration, gradient accumulation, an exit code of
its own, torch.compile, a GPU and bf16 autocast. It prints its own count and timing of its
optimizer steps on its last line.

The model (without ``--dict-batches``): Linear(16, H), ReLU, Linear(H, 1), H = ``--hidden``."""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from collections.abc import Iterator
from typing import Any

import torch
from torch.utils.data import DataLoader, TensorDataset


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--two-optimizers", action="store_true")
    p.add_argument("--accumulate", type=int, default=1)
    p.add_argument("--sleep", type=float, default=0.01, help="seconds of 'work' a micro-batch")
    p.add_argument("--exit-code", type=int, default=0)
    p.add_argument("--interrupted-code", type=int, help="on a Ctrl-C: say so and exit with this code")
    p.add_argument("--print-every", type=int, default=0, help="a progress line on stdout every N steps")
    p.add_argument("--eval-every", type=int, default=0, help="an evaluation pass (10 batches of 64) every N steps")
    p.add_argument("--new-optimizer-after", type=int, default=0, help="a fresh AdamW takes over after N steps")
    p.add_argument("--interrupt-takes", type=float, default=0.0, help="seconds a Ctrl-C's clean-up takes")
    p.add_argument("--keep-old-optimizer", action="store_true", help="the replaced optimizer stays referenced")
    p.add_argument("--dict-batches", action="store_true", help="batches as {'input_ids': ..., 'labels': ...}")
    p.add_argument("--spawn-workers", action="store_true", help="DataLoader workers started with 'spawn'")
    p.add_argument("--odd-batches", action="store_true", help="batches of an object whose attributes raise")
    p.add_argument("--hidden", type=int, default=32, help="the MLP's hidden width")
    p.add_argument("--compile", action="store_true", help="torch.compile the model (with --backend)")
    p.add_argument("--backend", default="eager", help="torch.compile's backend (inductor needs a C++ compiler)")
    p.add_argument("--device", default="cpu")
    p.add_argument("--bf16", action="store_true", help="the forward pass under bf16 autocast")
    p.add_argument("--fp16", action="store_true", help="the forward pass under fp16 autocast")
    p.add_argument("--warn-each-step", action="store_true", help="a library's warning at one line every step")
    return p.parse_args()


class Tokens(torch.utils.data.Dataset):
    def __init__(self, n: int) -> None:
        self.ids = torch.randint(0, 100, (n, 12))

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return {"input_ids": self.ids[i], "labels": self.ids[i]}


class Odd:
    """A batch object of a kind nobody expects: reading its attributes fails."""

    def __init__(self, x: torch.Tensor, y: torch.Tensor) -> None:
        self.pair = (x, y)

    def __iter__(self) -> Iterator[torch.Tensor]:
        return iter(self.pair)

    @property
    def __dict__(self) -> dict[str, Any]:  # type: ignore[override]
        raise RuntimeError("no attributes here")

    @staticmethod
    def collate(items: list[tuple[torch.Tensor, torch.Tensor]]) -> Odd:
        return Odd(torch.stack([i[0] for i in items]), torch.stack([i[1] for i in items]))


def evaluate(model: torch.nn.Module, data: torch.utils.data.Dataset, dict_batches: bool) -> None:
    """An evaluation pass over 10 batches of 64 from a loader of its own, without gradients."""
    device = next(model.parameters()).device
    with torch.no_grad():
        for i, batch in enumerate(DataLoader(data, batch_size=64)):
            model((batch["input_ids"] if dict_batches else batch[0]).to(device))
            if i == 9:
                break


def build(args: argparse.Namespace) -> tuple[torch.utils.data.Dataset, torch.nn.Module, DataLoader]:
    """The data, the model and the loader the options ask for."""
    torch.manual_seed(0)
    if args.dict_batches:
        data: torch.utils.data.Dataset = Tokens(4096)
        model: torch.nn.Module = torch.nn.Sequential(
            torch.nn.Embedding(100, 16), torch.nn.Flatten(), torch.nn.Linear(192, 1)
        )
    else:
        data = TensorDataset(torch.randn(4096, 16), torch.randn(4096, 1))
        model = torch.nn.Sequential(torch.nn.Linear(16, args.hidden), torch.nn.ReLU(), torch.nn.Linear(args.hidden, 1))
    model = model.to(args.device)
    if args.compile:
        model = torch.compile(model, backend=args.backend)  # type: ignore[assignment]
    loader = DataLoader(
        data,
        batch_size=args.batch,
        num_workers=args.workers,
        shuffle=True,
        drop_last=True,
        multiprocessing_context="spawn" if args.spawn_workers and args.workers else None,
        collate_fn=Odd.collate if args.odd_batches else None,
    )
    return data, model, loader


def loss_of(model: torch.nn.Module, batch: Any, args: argparse.Namespace) -> torch.Tensor:
    """One micro-batch's loss (its share of the step's)."""
    device = torch.device(args.device)
    half = torch.float16 if args.fp16 else torch.bfloat16
    with torch.autocast(device.type, dtype=half, enabled=args.bf16 or args.fp16):
        if args.dict_batches:
            out = model(batch["input_ids"].to(device))
        else:
            x, y = batch
            out = model(x.to(device)) - y.to(device)
    return out.float().pow(2).mean() / args.accumulate


def library_call() -> None:
    """What a library does on every call (torch's barrier() without a device id): a warning that
    Python shows once, at its first call."""
    warnings.warn("this call has no device id: using the current device", UserWarning, stacklevel=1)


def main() -> int:
    args = parse()
    data, model, loader = build(args)
    layers = list(model.children())
    first: torch.optim.Optimizer = torch.optim.SGD(layers[0].parameters(), lr=0.01)
    second = torch.optim.Adam(layers[-1].parameters(), lr=0.001) if args.two_optimizers else None
    if second is None:
        first = torch.optim.SGD(model.parameters(), lr=0.01)
    steps = micro = 0
    start = None
    kept: list[torch.optim.Optimizer] = []
    while steps < args.steps:
        for batch in loader:
            loss = loss_of(model, batch, args)
            loss.backward()
            time.sleep(args.sleep)
            micro += 1
            if micro % args.accumulate:
                continue
            first.step()
            if second is not None:
                second.step()
            first.zero_grad()
            if second is not None:
                second.zero_grad()
            steps += 1
            if args.warn_each_step:
                library_call()
            if args.eval_every and steps % args.eval_every == 0:
                evaluate(model, data, args.dict_batches)
            if args.new_optimizer_after and steps == args.new_optimizer_after:
                if args.keep_old_optimizer:
                    kept.append(first)
                first, second = torch.optim.AdamW(model.parameters(), lr=1e-3), None  # the next phase
            if args.print_every and steps % args.print_every == 0:
                print(f"step {steps} loss {loss.item():.4f}", flush=True)
            if steps == 5:
                start = time.monotonic()  # its own timing: from its 5th step to its last
            if steps >= args.steps:
                break
    took = time.monotonic() - start if start is not None else 0.0
    samples = (steps - 5) * args.batch * args.accumulate
    print(
        f"JOB steps={steps} timed_steps={steps - 5} seconds={took:.6f} samples_per_s={samples / took:.3f}", flush=True
    )
    return args.exit_code


if __name__ == "__main__":
    if "--interrupted-code" in sys.argv:
        try:
            sys.exit(main())
        except KeyboardInterrupt:
            time.sleep(parse().interrupt_takes)  # saving a checkpoint, say
            print("JOB interrupted", flush=True)
            sys.exit(parse().interrupted_code)
    sys.exit(main())
