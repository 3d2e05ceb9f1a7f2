"""A user's training loop whose step is thousands of small operators (a long chain of tiny
elementwise layers, as an unfused model makes): a profiler window of it writes hundreds of MB of
trace. Prints ``JOB steps=N`` at its end."""

from __future__ import annotations

import argparse

import torch


class Chain(torch.nn.Module):
    def __init__(self, depth: int) -> None:
        super().__init__()
        self.scales = torch.nn.ParameterList(torch.nn.Parameter(torch.ones(64)) for _ in range(depth))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for scale in self.scales:
            x = torch.tanh(x * scale)
        return x


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--depth", type=int, default=1000, help="layers: about 3 operators each, forward")
    args = p.parse_args()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model = Chain(args.depth).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    x = torch.randn(32, 64, device=device)
    for _ in range(args.steps):
        loss = model(x).square().mean()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
    print(f"JOB steps={args.steps}", flush=True)


if __name__ == "__main__":
    main()
