"""A user's loop of tiny steps, as fast as the CPU runs them, that says in its ``finally`` how many
optimizer steps it ran (however it ended): ``JOB ran N steps``."""

from __future__ import annotations

import sys

import torch


def main() -> None:
    model = torch.nn.Linear(16, 16)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    steps = 0
    try:
        while steps < float(sys.argv[1]):
            loss = model(torch.randn(8, 16)).pow(2).mean()
            optimizer.zero_grad()
            loss.backward()
            steps += 1  # counted as it is taken (a run ended at a step ends inside its optimizer.step())
            optimizer.step()
    finally:
        print(f"JOB ran {steps} steps", flush=True)


if __name__ == "__main__":
    main()
