"""Synthetic data: seeded batch pools in host memory (pinned when CUDA is in use)."""

from __future__ import annotations

from collections.abc import Callable

import torch

# Keep a pool small enough to build in well under a second, large enough not to be one batch.
POOL_BYTES = 256 * 2**20
MAX_POOL_BATCHES = 8


class HostBatchPool:
    """A few pre-generated batches, handed out in a fixed cycle.

    Batches are made once from a seeded generator, so two workloads built with the same
    seed and batch size see the same sequence of batches (the equivalence tests rely on it).
    """

    def __init__(
        self,
        make_batch: Callable[[torch.Generator], tuple[torch.Tensor, ...]],
        *,
        seed: int,
        pin: bool,
    ) -> None:
        gen = torch.Generator().manual_seed(seed)
        first = make_batch(gen)
        size = sum(t.numel() * t.element_size() for t in first)
        count = max(1, min(MAX_POOL_BATCHES, POOL_BYTES // max(size, 1)))  # huge batches: one, reused
        batches = [first] + [make_batch(gen) for _ in range(count - 1)]
        if pin:
            batches = [tuple(t.pin_memory() for t in b) for b in batches]
        self.batches = batches
        self._next = 0

    def __len__(self) -> int:
        return len(self.batches)

    def next(self) -> tuple[torch.Tensor, ...]:
        batch = self.batches[self._next]
        self._next = (self._next + 1) % len(self.batches)
        return batch


def to_device(tensors: tuple[torch.Tensor, ...], device: torch.device) -> tuple[torch.Tensor, ...]:
    """Copy to ``device`` without blocking the host, on the current stream."""
    return tuple(t.to(device, non_blocking=True) for t in tensors)


def random_images_u8(gen: torch.Generator, n: int, size: int) -> torch.Tensor:
    return torch.randint(0, 256, (n, 3, size, size), dtype=torch.uint8, generator=gen)


def shutdown_loader_workers(batches: object) -> None:
    """Stop a DataLoader iterator's (persistent) worker processes now, not at garbage collection."""
    shutdown = getattr(batches, "_shutdown_workers", None)
    if shutdown is not None:
        shutdown()
