"""A user's segmentation-style loss with host-device syncs on known lines (the GPU tests of the
sync table find each line by its ``# SYNC:`` marker). ``workload`` is a gpudash.api factory."""

from __future__ import annotations

import torch
from torch import nn

from gpudash.api import Training

IGNORE = 255


def count_valid(mask: torch.Tensor) -> int:
    return mask.nonzero().shape[0]  # SYNC: helper


def their_loss(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    valid = target != IGNORE
    n = count_valid(valid)  # SYNC: first caller
    m = count_valid(valid)  # SYNC: second caller
    picked = logits[valid]  # SYNC: boolean mask
    classes = torch.unique(target)  # SYNC: unique
    scale = 1.0
    if bool(valid.any()):  # SYNC: any
        scale += float(picked.abs().mean().item()) * 0.0  # SYNC: item
    if logits.is_cuda:
        torch.cuda.synchronize()  # SYNC: synchronize
    loss = nn.functional.cross_entropy(picked, target[valid])  # the mask's backward syncs too
    return loss * scale * (n / max(m, 1)) + 0.0 * classes.numel()


def step(model: nn.Module, x: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    loss = their_loss(model(x), target)
    loss.backward()  # SYNC: backward
    return loss


def workload(batch_size: int, device: torch.device) -> Training:
    model = nn.Linear(16, 8)

    def batch(gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        target = torch.randint(0, 8, (batch_size,), generator=gen)
        target[::4] = IGNORE
        return torch.randn(batch_size, 16, generator=gen), target

    return Training(
        model=model, loss_fn=their_loss, optimizer=torch.optim.SGD(model.parameters(), lr=0.01), batch=batch
    )
