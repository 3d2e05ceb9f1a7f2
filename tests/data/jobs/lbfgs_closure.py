"""A user's LBFGS training, as pytorch/examples' time_sequence_prediction writes it: an LSTM on sine
waves, ``optimizer.step(closure)`` whose closure zeroes the gradients, runs the forward and
``loss.backward()`` and returns the loss; LBFGS evaluates the closure up to ``max_iter`` times a
step, so a step takes seconds. Its last line: its own count of steps, the seconds they took and its
rate."""

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
    return p.parse_args()


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
    phase = torch.randint(-80, 80, (args.waves, 1)).double()
    data = torch.sin((torch.arange(args.length + 1).double() + phase) / 20.0)
    x, y = data[:, :-1], data[:, 1:]
    model = Sequence(args.hidden).double()
    criterion = nn.MSELoss()
    optimizer = torch.optim.LBFGS(model.parameters(), lr=0.8, max_iter=args.max_iter)
    took = 0.0
    for step in range(args.steps):
        began = time.perf_counter()

        def closure() -> torch.Tensor:
            optimizer.zero_grad()
            loss = criterion(model(x), y)
            loss.backward()
            return loss

        loss = optimizer.step(closure)
        step_s = time.perf_counter() - began
        took += step_s
        print(f"step {step} loss {loss.item():.6f} took {step_s:.3f} s", flush=True)
    print(f"lbfgs_closure: {args.steps} steps in {took:.3f} s: {args.steps / took:.4f} steps/s", flush=True)


if __name__ == "__main__":
    main()
