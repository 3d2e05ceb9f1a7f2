"""A user's small-model training script whose step takes a few milliseconds: an MLP over a
DataLoader of in-memory tensors (pinned, non-blocking copies), as the second job of
``benchmarks/job_overhead.py``; its own timing of its steps on its last line."""

from __future__ import annotations

import argparse
import sys
import time

import torch
from torch.utils.data import DataLoader, TensorDataset


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=600)
    p.add_argument("--batch", type=int, default=512)
    p.add_argument("--width", type=int, default=4096)
    p.add_argument("--warmup", type=int, default=50)
    args = p.parse_args()
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    data = TensorDataset(torch.randn(args.batch * 16, 256), torch.randint(0, 10, (args.batch * 16,)))
    loader = DataLoader(data, batch_size=args.batch, shuffle=True, drop_last=True, pin_memory=device.type == "cuda")
    w = args.width
    layers = [torch.nn.Linear(256, w), torch.nn.ReLU(), torch.nn.Linear(w, w), torch.nn.ReLU(), torch.nn.Linear(w, 10)]
    model = torch.nn.Sequential(*layers).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    step, start = 0, 0.0
    while step < args.steps:
        for x, y in loader:
            x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
            loss = torch.nn.functional.cross_entropy(model(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            step += 1
            if step == args.warmup:
                if device.type == "cuda":
                    torch.cuda.synchronize()
                start = time.perf_counter()
            if step >= args.steps:
                break
    if device.type == "cuda":
        torch.cuda.synchronize()
    took = time.perf_counter() - start
    timed = args.steps - args.warmup
    print(
        f"JOB steps={args.steps} timed_steps={timed} seconds={took:.6f} samples_per_s={timed * args.batch / took:.3f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
