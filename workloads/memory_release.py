"""What a workload's configuration holds, given back: the device drained, the configuration
released and the allocator's cached blocks returned to the driver at each change and at the end;
the pool of host batches kept across a change that leaves its batches alone. ``Workload``
(``workloads.base``) takes them from here."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import torch

from workloads.data import HostBatchPool


class MemoryRelease:
    """``drain``, ``close``, ``host_pool`` and the release at a change. The rest of the workload
    (``workloads.base.Workload``) frees what its configuration built (``_release``)."""

    _kept_pool: tuple[tuple[object, ...], HostBatchPool] | None = None  # the last pool, what its batches depend on

    if TYPE_CHECKING:  # pragma: no cover - what this part reads of the workload
        device: torch.device
        batch_size: int
        image_size: int

        def _release(self) -> None: ...

        @property
        def data_seed(self) -> int: ...
        @property
        def on_cuda(self) -> bool: ...

    def drain(self) -> None:
        """Wait until every stream of the device is idle (used at reconfigure, never per step)."""
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def _release_and_drain(self) -> None:
        """Free the configuration, wait for the device, and give the allocator's cached blocks back
        to the driver. Without the last part each visit to a pipelined variant left ~500 MiB
        cached for streams no later configuration uses (encdec on an H100: reserved 1388 → 3390
        MiB over 4 serial ↔ pipelined changes, flat at ~700 MiB with it; docs/soak-gpu.md), and the
        dashboard's GPU-memory chart showed the past configurations' memory as the running one's."""
        self._release()
        self.drain()
        self._empty_cache()

    def _empty_cache(self) -> None:
        """Give the allocator's free cached segments back to the driver (CUDA; nothing elsewhere)."""
        if self.device.type == "cuda":
            with torch.cuda.device(self.device):
                torch.cuda.empty_cache()

    def close(self) -> None:
        self._release_and_drain()
        self._kept_pool = None

    def host_pool(
        self, make_batch: Callable[[torch.Generator], tuple[torch.Tensor, ...]], *depends_on: object
    ) -> HostBatchPool:
        """The pool of host batches ``make_batch`` makes for this configuration (``depends_on``:
        what else than the batch size, image size and seed its batches depend on). A change that
        leaves all that alone (a knob, most variants) gets the last pool again, from its first
        batch, as a new one would start (generating and pinning them again was a share of every
        switch: docs/BENCHMARKS.md, tune against the sweep). Another gets a new one, the old one
        freed first."""
        key = (self.batch_size, self.image_size, self.data_seed, self.on_cuda, *depends_on)
        if self._kept_pool is not None and self._kept_pool[0] == key:
            pool = self._kept_pool[1]
            pool.rewind()
            return pool
        self._kept_pool = None
        pool = HostBatchPool(make_batch, seed=self.data_seed, pin=self.on_cuda)
        self._kept_pool = (key, pool)
        return pool
