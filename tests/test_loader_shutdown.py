"""A DataLoader's workers give back what they hold when a configuration ends, even when something
else keeps their Process objects alive (torch 2.11's atexit hook for persistent, pinning loaders)."""

from __future__ import annotations

import os

import torch
from torch.utils.data import DataLoader, TensorDataset

from workloads.data import shutdown_loader_workers


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_ending_a_loader_gives_back_its_workers_pipes_even_when_their_processes_are_kept() -> None:
    """Four loaders of 2 workers, started and ended as configurations: no descriptor left after the first,
    where keeping each worker's Popen open left 2 per worker (the GPU soak's workload fds)."""
    data = TensorDataset(torch.arange(64))
    kept = []  # what torch 2.11's per-worker atexit hook holds until the program ends
    after_first = 0
    for n in range(4):
        # pinning on a GPU: the case where torch 2.11 itself registers the hook
        batches = iter(DataLoader(data, batch_size=8, num_workers=2, persistent_workers=True,
                                  pin_memory=torch.cuda.is_available()))
        next(batches)
        kept.extend(batches._workers)
        shutdown_loader_workers(batches)
        del batches
        if n == 0:  # the first one also opens what stays open (CUDA's device files when pinning)
            after_first = _open_fds()
    assert _open_fds() <= after_first
    assert not any(w.is_alive() for w in kept)  # what that hook asks at exit still answers
