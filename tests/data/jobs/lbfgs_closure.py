"""A user's LBFGS training, as pytorch/examples' time_sequence_prediction writes it: an LSTM on sine
waves, ``optimizer.step(closure)`` whose closure zeroes the gradients, runs the forward and
``loss.backward()`` and returns the loss; LBFGS evaluates the closure up to ``max_iter`` times a
step, so a step takes seconds; with ``--long-at N --long-x K`` step N runs on sequences K times
longer (a step that computes K times as long). Each step's line says its seconds; its last line: its
own count of steps, the seconds they took and its rate."""

from __future__ import annotations

import argparse
import time

import torch
from torch import nn


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--hidden", type=int, default=51)
    p.add_argument("--waves", type=int, default=97, help="sequences in the batch")
    p.add_argument("--length", type=int, default=400, help="points a sequence")
    p.add_argument("--max-iter", type=int, default=20, help="LBFGS' closure evaluations a step, at most")
    p.add_argument("--long-at", type=int, default=-1, help="this step (from 0) on sequences --long-x times longer")
    p.add_argument("--long-x", type=int, default=1, help="how many times longer that step's sequences are")
    return p.parse_args()


def waves(count: int, length: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``count`` sine waves of ``length`` points, shifted at random: inputs and the next points."""
    phase = torch.randint(-80, 80, (count, 1)).double()
    data = torch.sin((torch.arange(length + 1).double() + phase) / 20.0)
    return data[:, :-1], data[:, 1:]


class Sequence(nn.Module):
    def __init__(self, hidden: int) -> None:
        super().__init__()
        self.hidden = hidden
        self.lstm1 = nn.LSTMCell(1, hidden)
        self.lstm2 = nn.LSTMCell(hidden, hidden)
        self.linear = nn.Linear(hidden, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        outputs = []
        h = c = torch.zeros(x.size(0), self.hidden, dtype=x.dtype)
        h2 = c2 = torch.zeros(x.size(0), self.hidden, dtype=x.dtype)
        for point in x.split(1, dim=1):
            h, c = self.lstm1(point, (h, c))
            h2, c2 = self.lstm2(h, (h2, c2))
            outputs.append(self.linear(h2))
        return torch.cat(outputs, dim=1)


def main() -> None:
    args = parse()
    torch.manual_seed(0)
    x, y = waves(args.waves, args.length)
    long_x, long_y = waves(args.waves, args.length * args.long_x)
    model = Sequence(args.hidden).double()
    criterion = nn.MSELoss()
    optimizer = torch.optim.LBFGS(model.parameters(), lr=0.8, max_iter=args.max_iter)
    took = 0.0
    for step in range(args.steps):
        began = time.perf_counter()
        inputs, targets = (long_x, long_y) if step == args.long_at else (x, y)

        def closure(inputs: torch.Tensor = inputs, targets: torch.Tensor = targets) -> torch.Tensor:
            optimizer.zero_grad()
            loss = criterion(model(inputs), targets)
            loss.backward()
            return loss

        loss = optimizer.step(closure)
        step_s = time.perf_counter() - began
        took += step_s
        print(f"step {step} loss {loss.item():.6f} took {step_s:.3f} s", flush=True)
    print(f"lbfgs_closure: {args.steps} steps in {took:.3f} s: {args.steps / took:.4f} steps/s", flush=True)


if __name__ == "__main__":
    main()
