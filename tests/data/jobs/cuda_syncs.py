"""A user's CUDA training loop that makes the host wait twice a step, on known lines (each marked
``# SYNC:``): the GPU test of ``gpudash -- CMD`` finds them by file and line."""

from __future__ import annotations

import sys

import torch


def main() -> int:
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 400
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(512, 2048), torch.nn.ReLU(), torch.nn.Linear(2048, 10)).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(256, 512, device="cuda")
    y = torch.randint(0, 10, (256,), device="cuda")
    total = 0.0
    for _ in range(steps):
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if bool(torch.isnan(loss)):  # SYNC: bool
            break
        total += loss.item()  # SYNC: item
    print(f"JOB steps={steps} mean_loss={total / steps:.4f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
