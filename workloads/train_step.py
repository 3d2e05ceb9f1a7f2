"""One SGD step as every family trains it, and the gradient accumulation of the ``ddp_no_sync`` knob."""

from __future__ import annotations

import contextlib
from collections.abc import Callable

import torch


def train_step(
    model: torch.nn.Module,
    criterion: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    inputs: torch.Tensor,
    targets: torch.Tensor,
    autocast: Callable[[], contextlib.AbstractContextManager] = contextlib.nullcontext,
) -> torch.Tensor:
    """One SGD step on the current stream; returns the loss, detached (no host sync).

    ``autocast`` wraps forward and loss only (the ``amp`` knob), never backward or the step.
    A DDP model with an ``accumulation`` (the ``ddp_no_sync`` knob) accumulates gradients over
    K calls under ``no_sync`` and all-reduces and steps the optimizer on the K-th."""
    # A plain attribute of the DDP wrapper, in its __dict__ (nn.Module's __getattr__ would build an
    # error message at every step of every model without one).
    accumulation: GradientAccumulation | None = vars(model).get("accumulation")
    if accumulation is None and autocast is contextlib.nullcontext:
        # The common step, written as a user's own loop writes it (no ``with`` blocks that do nothing).
        optimizer.zero_grad(set_to_none=True)
        loss = criterion(model(inputs), targets)
        loss.backward()
        optimizer.step()
        return loss.detach()
    first, last = accumulation.advance() if accumulation is not None else (True, True)
    if first:
        optimizer.zero_grad(set_to_none=True)
    with contextlib.nullcontext() if last else model.no_sync():  # type: ignore[operator]  # a model with an accumulation is DDP's
        with autocast():
            loss = criterion(model(inputs), targets)
        loss.backward()
    if last:
        optimizer.step()
    return loss.detach()


class GradientAccumulation:
    """Which of K micro-steps this is: gradients are zeroed on the first and applied on the K-th."""

    def __init__(self, steps: int) -> None:
        self.steps, self.position = steps, 0  # position: the micro-step about to run, 0..K-1

    def advance(self) -> tuple[bool, bool]:
        """(first of the K, last of the K) for the call about to run."""
        i, self.position = self.position, (self.position + 1) % self.steps
        return i == 0, i == self.steps - 1
