"""A user's small-model training script whose step takes a few milliseconds: an MLP over a
DataLoader of in-memory tensors (pinned, non-blocking copies), as the second job of
the ``job_overhead`` case (and the step of ``job_hook_cost``); its own timing
of its steps on its last line."""

from __future__ import annotations

import os
import sys
from typing import Any

import torch
from torch.utils.data import DataLoader, TensorDataset

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
from benchmarks.jobs.resnet_job import job_args, report, timed_loop  # noqa: E402 - the repository's root first


def build(
    batch: int, width: int, device: torch.device
) -> tuple[DataLoader[Any], torch.nn.Module, torch.optim.Optimizer]:
    """The job's data (16 batches an epoch, shuffled), its MLP (256-``width``-``width``-10) and AdamW."""
    data = TensorDataset(torch.randn(batch * 16, 256), torch.randint(0, 10, (batch * 16,)))
    loader = DataLoader(data, batch_size=batch, shuffle=True, drop_last=True, pin_memory=device.type == "cuda")
    layers = [
        torch.nn.Linear(256, width),
        torch.nn.ReLU(),
        torch.nn.Linear(width, width),
        torch.nn.ReLU(),
        torch.nn.Linear(width, 10),
    ]
    model = torch.nn.Sequential(*layers).to(device)
    return loader, model, torch.optim.AdamW(model.parameters(), lr=1e-4)


def train_step(model: torch.nn.Module, opt: torch.optim.Optimizer, batch: Any, device: torch.device) -> None:
    """One step on one batch: the copy to the device, forward, backward, AdamW."""
    x, y = (t.to(device, non_blocking=True) for t in batch)
    loss = torch.nn.functional.cross_entropy(model(x), y)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()


def main() -> int:
    args = job_args(steps=600, batch=512, width=4096, warmup=50)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    loader, model, opt = build(args.batch, args.width, device)
    took = timed_loop(lambda batch: train_step(model, opt, batch, device), loader, args.steps, args.warmup, device)
    report(args.steps, args.warmup, args.batch, took)
    return 0


if __name__ == "__main__":
    sys.exit(main())
