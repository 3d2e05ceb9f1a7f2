"""A user's CUDA training loop that makes the host wait twice a step, on known lines (each marked
``# SYNC:``): the GPU test of ``gpudash -- CMD`` finds them by file and line. ``--no-syncs``: its
twin without them (what removing them is worth: ``python -m benchmarks run remedy_check``); ``--timed``: its
last line gives its own steps/s after a warm-up."""

from __future__ import annotations

import sys
import time
import warnings

import torch


def main() -> int:
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 400
    strict = "--strict-warnings" in sys.argv  # its own filter: every warning around .item() an error
    guard = "--sync-guard" in sys.argv  # its own sync guard: torch raises at every sync, which it counts
    free = "--no-syncs" in sys.argv  # its twin without the syncs: the loss summed on the GPU, read once
    timed = "--timed" in sys.argv  # its own steps/s after a warm-up (one more sync, at the warm-up's end)
    caught = 0
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(512, 2048), torch.nn.ReLU(), torch.nn.Linear(2048, 10)).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(256, 512, device="cuda")
    y = torch.randint(0, 10, (256,), device="cuda")
    total = 0.0
    summed = torch.zeros((), device="cuda")
    if guard:  # once its model and data are on the GPU (copying them there syncs)
        torch.cuda.set_sync_debug_mode("error")
    warm = min(50, steps // 4)
    began = time.monotonic()
    for step in range(steps):
        if step == warm and timed:
            torch.cuda.synchronize()
            began = time.monotonic()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if free:
            summed += loss.detach()
            continue
        if guard:
            try:
                loss.item()
            except RuntimeError:
                caught += 1  # its guard caught the sync
            continue
        if bool(torch.isnan(loss)):  # SYNC: bool
            break
        if strict:
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                total += loss.item()  # SYNC: strict item
        else:
            total += loss.item()  # SYNC: item
    torch.cuda.synchronize()
    rate = (steps - warm) / (time.monotonic() - began)
    total = float(summed) if free else total
    print(f"JOB steps={steps} mean_loss={total / steps:.4f} caught={caught} steps_per_s={rate:.2f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
