"""Synthetic data: seeded batch pools in host memory (pinned when CUDA is in use)."""

from __future__ import annotations

import multiprocessing
import multiprocessing.connection
import os
import sys
import threading
from collections.abc import Callable, Sequence
from typing import Any

import torch

from workloads.torch_adapter import close_process_pipes, stop_loader_workers

# Keep a pool small enough to build in well under a second, large enough not to be one batch.
POOL_BYTES = 256 * 2**20
MAX_POOL_BATCHES = 8


def pool_batches(batch_bytes: int) -> int:
    """How many batches a pool keeps: up to POOL_BYTES of them; a huge batch: one, reused."""
    return max(1, min(MAX_POOL_BATCHES, POOL_BYTES // max(batch_bytes, 1)))


def pool_bytes_held(batch_bytes: int, pin: bool) -> int:
    """Host bytes a pool of such batches holds at its peak (pinning copies each batch once)."""
    return pool_batches(batch_bytes) * batch_bytes * (2 if pin else 1)


def loader_bytes_held(batch_bytes: int, workers: int, pin: bool, prefetch_factor: int = 2) -> int:
    """Host bytes a DataLoader holds at once: each worker's prefetched batches (shared memory),
    the batch in hand, and its pinned copy."""
    return batch_bytes * (workers * prefetch_factor + 1 + (1 if pin else 0))


class HostBatchPool:
    """A few pre-generated batches, handed out in a fixed cycle.

    Batches are made once from a seeded generator, so two workloads built with the same
    seed and batch size see the same sequence of batches (the equivalence tests rely on it).
    """

    def __init__(
        self, make_batch: Callable[[torch.Generator], tuple[torch.Tensor, ...]], *, seed: int, pin: bool
    ) -> None:
        gen = torch.Generator().manual_seed(seed)
        first = make_batch(gen)
        count = pool_batches(sum(t.numel() * t.element_size() for t in first))
        batches = [first] + [make_batch(gen) for _ in range(count - 1)]
        if pin:
            batches = [tuple(t.pin_memory() for t in b) for b in batches]
        self.batches = batches
        self._next = 0

    def __len__(self) -> int:
        return len(self.batches)

    def rewind(self) -> None:
        """Start the cycle again from the first batch (as a pool made anew would)."""
        self._next = 0

    def next(self) -> tuple[torch.Tensor, ...]:
        batch = self.batches[self._next]
        self._next = (self._next + 1) % len(self.batches)
        return batch


def to_device(tensors: tuple[torch.Tensor, ...], device: torch.device) -> tuple[torch.Tensor, ...]:
    """Copy to ``device`` without blocking the host, on the current stream."""
    return tuple(t.to(device, non_blocking=True) for t in tensors)


def random_images_u8(gen: torch.Generator, n: int, size: int) -> torch.Tensor:
    return torch.randint(0, 256, (n, 3, size, size), dtype=torch.uint8, generator=gen)


def shutdown_loader_workers(batches: object) -> list[int]:
    """Stop a DataLoader iterator's (persistent) worker processes now, not at garbage collection,
    give back the two pipes each reaped worker's ``Popen`` holds, and return the workers' exit
    codes (a worker that ended abnormally is also said on stderr: the workload's log).

    torch 2.11 registers an ``atexit`` hook per worker of a persistent, pinning loader (later
    versions keep a weak set), so each worker's ``Process`` lives to the end of the program with
    its pipes: 2 file descriptors per worker leaked at every configuration change on a GPU (the
    GPU soak, docs/soak-gpu.md). Closing the ``Popen`` of a reaped worker frees them; its
    ``is_alive()`` still answers False, as that hook asks at exit. Both steps lean on torch's and
    multiprocessing's private names (``workloads.torch_adapter`` says why)."""
    codes = []
    for worker in stop_loader_workers(batches):
        code = worker.exitcode
        if code is not None:
            codes.append(code)
            close_process_pipes(worker)
    if any(codes):
        print(
            f"gpudash: DataLoader workers ended with exit codes {codes} when their loader shut down",
            file=sys.stderr,
            flush=True,
        )
    return codes


def loader_worker_options(workers: int, data_parallel: bool, preload: Sequence[str]) -> dict[str, Any]:
    """How a DataLoader starts its ``workers``, as DataLoader keyword arguments: nothing to add
    without workers or in a single workload process (the platform's fork, the cheapest), a
    forkserver in a data-parallel rank.

    torchrun's launcher starts each rank with ``spawn``, which then is the rank's default start
    method: spawned workers imported torch afresh at every configuration, and on two H200s they
    aborted as a batch-size change shut them down ("terminate called without an active
    exception"), which ended the run (docs/bench/h200x2-ddp/input-pipeline-fork-abort.txt). A
    forkserver is started once per rank from a clean interpreter, imports ``preload`` once, and
    forks each worker from there. Its workers' parent is the server, not the rank, so torch's
    own watchdog (which watches the parent pid) would let them outlive a killed rank:
    ``exit_with_launcher`` watches the rank instead. The CPU ranks (gloo) take the same path,
    so that it is tested without a GPU.
    """
    if workers == 0 or not data_parallel:
        return {}
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(list(preload))  # read when the rank's server first starts
    return {"multiprocessing_context": context, "worker_init_fn": exit_with_launcher}


def exit_with_launcher(_worker_id: int) -> None:
    """In a worker: end the process as soon as the process that started it (the rank) is gone."""
    launcher = multiprocessing.parent_process()
    if launcher is None:
        return

    def watch() -> None:
        multiprocessing.connection.wait([launcher.sentinel])
        os._exit(0)

    threading.Thread(target=watch, name="gpudash-exit-with-launcher", daemon=True).start()
