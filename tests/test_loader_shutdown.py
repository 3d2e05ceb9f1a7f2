"""A DataLoader's workers give back what they hold when a configuration ends, even when something
else keeps their Process objects alive (torch 2.11's atexit hook for persistent, pinning loaders)."""

from __future__ import annotations

import gc
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.dataloader import _MultiProcessingDataLoaderIter

from gpudash.core import procgroup
from workloads.data import shutdown_loader_workers

ROOT = Path(__file__).resolve().parent.parent


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
        batches = iter(
            DataLoader(data, batch_size=8, num_workers=2, persistent_workers=True, pin_memory=torch.cuda.is_available())
        )
        next(batches)
        assert isinstance(batches, _MultiProcessingDataLoaderIter)  # 2 workers: torch's iterator of processes
        kept.extend(batches._workers)
        shutdown_loader_workers(batches)
        del batches
        if n == 0:  # the first one also opens what stays open (CUDA's device files when pinning)
            after_first = _open_fds()
    # a loader's queues close their pipes from their feeder threads, a moment after the loader ends:
    # wait for that (a leak stays: 2 per worker and configuration, 12 here)
    deadline = time.monotonic() + 30
    while _open_fds() > after_first and time.monotonic() < deadline:
        gc.collect()
        time.sleep(0.05)
    assert _open_fds() <= after_first
    assert not any(w.is_alive() for w in kept)  # what that hook asks at exit still answers


RANK_WITH_A_LOADER = textwrap.dedent("""
    import time, torch
    from torch.utils.data import DataLoader, TensorDataset
    from workloads.data import loader_worker_options
    loader = DataLoader(TensorDataset(torch.arange(100_000)), batch_size=8, num_workers=2, persistent_workers=True,
                        **loader_worker_options(2, True, preload=["torch"]))
    batches = iter(loader)
    next(batches)
    print(" ".join(str(w.pid) for w in batches._workers), flush=True)
    time.sleep(120)
""")


@pytest.mark.slow
def test_the_forkserver_workers_of_a_killed_rank_end_with_it() -> None:
    """A data-parallel rank's workers come from a forkserver, so their parent is the server and
    torch's watchdog (which watches the parent) would keep them alive after a SIGKILL of the
    rank, with the server. They watch the rank itself: within seconds nothing of the rank is left,
    without anyone signalling its process group."""
    rank = subprocess.Popen(
        [sys.executable, "-c", RANK_WITH_A_LOADER], cwd=ROOT, stdout=subprocess.PIPE, text=True, start_new_session=True
    )  # its own group, to find what it leaves behind
    try:
        workers = [int(pid) for pid in rank.stdout.readline().split()]  # type: ignore[union-attr]
        assert len(workers) == 2
        rank.kill()
        rank.wait()
        assert procgroup.wait_empty(rank.pid, timeout=10.0), procgroup.members(rank.pid)
    finally:
        procgroup.signal_group(rank.pid, signal.SIGKILL)
