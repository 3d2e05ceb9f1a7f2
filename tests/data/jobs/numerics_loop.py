"""A user's small loop whose model says, at each forward, whether it runs under autocast and
compiled: ``numerics_loop.py [--steps N] [--bf16] [--compile]``. It prints
``JOB steps=N autocast_forwards=A out_dtype=D loss=L`` (``A``: forwards under autocast; ``D``: the
dtype the loss saw) on its last line; the same loss with the same settings every run."""

from __future__ import annotations

import argparse
import sys

import torch
from torch.utils.data import DataLoader, TensorDataset


class Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))
        self.autocast_forwards = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if torch.is_autocast_enabled("cpu") or torch.is_autocast_enabled("cuda"):
            self.autocast_forwards += 1
        return self.body(x)


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--bf16", action="store_true", help="the job's own bf16 autocast")
    p.add_argument("--compile", action="store_true", help="the job's own torch.compile")
    args = p.parse_args()
    torch.manual_seed(0)
    data = TensorDataset(torch.randn(512, 16), torch.randn(512, 1))
    loader = DataLoader(data, batch_size=16)
    net = Net()
    model = torch.compile(net) if args.compile else net
    opt = torch.optim.SGD(net.parameters(), lr=0.01)
    done, loss, dtype = 0, torch.zeros(()), ""
    while done < args.steps:
        for x, y in loader:
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.bf16):
                out = model(x)
            dtype = str(out.dtype)
            loss = torch.nn.functional.mse_loss(out.float() if args.bf16 else out, y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            done += 1
            if done >= args.steps:
                break
    print(f"JOB steps={done} autocast_forwards={net.autocast_forwards} out_dtype={dtype} loss={loss.item():.9g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
