"""Data parallelism for the workloads: each rank trains its family's model wrapped in
``torch.nn.parallel.DistributedDataParallel`` on its own slice of the data.

A workload knows nothing of the launcher: ``gpudash.engine.ranks`` starts the ranks with torchrun's
launcher (``torch.distributed.launcher.api.elastic_launch``) and initialises the process group;
a workload built with ``WorkloadOptions.distributed`` then

* draws different data on each rank (``data_seed``: the seed shifted by the rank), so the N ranks
  together train on a global batch of N × the per-rank batch, as one process would on the
  concatenated batch (DDP averages the gradients: the mean loss over the global batch when each
  rank's loss is a mean over the same number of items);
* wraps its trained module in DDP at every setup (after the model knobs are applied: DDP's
  gradient buckets are built over the parameters as they are then), with gpudash's DDP settings
  (``DdpSettings``: 100 MB buckets and ``gradient_as_bucket_view``, measured to scale better than
  torch's defaults; docs/BENCHMARKS.md) or those the ``ddp_*`` knobs choose (``workloads.knobs``).
  ``static_graph`` is not used: on two GPUs with NCCL the ranks' parameters came apart with it
  (by up to 4e-5 after four steps of ``encdec`` and ``sync_loss``, 2×H200, 2026-11-26), where
  without it they stay bitwise equal.

The model knobs that replace the module's forward with compiled or captured code (``compile``,
``cuda_graph``) are refused with DDP here: DDP's all-reduce hooks would have to be compiled or
captured with them, which gpudash does not do.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TypedDict

import torch

DATA_SEED_STRIDE = 1_000_003  # rank r draws its data from seed + r * stride


@dataclass(frozen=True)
class RankInfo:
    """This process's place in a data-parallel run (from torchrun's environment)."""

    rank: int
    world_size: int
    local_rank: int
    local_world_size: int = 1  # ranks on this machine: they share its CPUs

    @property
    def is_leader(self) -> bool:
        return self.rank == 0

    @classmethod
    def from_env(cls) -> RankInfo:
        """RANK, WORLD_SIZE, LOCAL_RANK and LOCAL_WORLD_SIZE as torchrun's launcher sets them."""
        return cls(
            int(os.environ["RANK"]),
            int(os.environ["WORLD_SIZE"]),
            int(os.environ.get("LOCAL_RANK", "0")),
            int(os.environ.get("LOCAL_WORLD_SIZE", "1")),
        )


def data_seed(seed: int, rank: int) -> int:
    """The seed rank ``rank`` draws its batches from (rank 0: the run's seed, as without DDP)."""
    return seed + rank * DATA_SEED_STRIDE


GPUDASH_BUCKET_MB = 100.0  # gpudash's bucket size; torch's own is 25 MB


@dataclass(frozen=True)
class DdpSettings:
    """How ``wrap`` sets DDP up. gpudash's defaults (larger buckets, gradients as views into them)
    hide more of the all-reduce behind the backward pass than torch's (docs/BENCHMARKS.md)."""

    bucket_cap_mb: float | None = GPUDASH_BUCKET_MB  # None: torch's default (25 MB)
    gradient_as_bucket_view: bool = True
    static_graph: bool = False  # see the module's docstring

    @classmethod
    def chosen(cls, *, bucket_mb: float | None, torch_defaults: bool) -> DdpSettings:
        """The settings the ``ddp_bucket_mb`` and ``ddp_torch_defaults`` knobs choose."""
        base = cls(None, False) if torch_defaults else cls()
        return base if bucket_mb is None else cls(bucket_mb, base.gradient_as_bucket_view)


class _DdpOptions(TypedDict, total=False):
    """The ``DistributedDataParallel`` arguments ``wrap`` passes (the others keep torch's defaults)."""

    gradient_as_bucket_view: bool
    static_graph: bool
    bucket_cap_mb: float
    device_ids: list[int | None]
    output_device: int | None


def wrap(module: torch.nn.Module, device: torch.device, settings: DdpSettings = DdpSettings()) -> torch.nn.Module:
    """``module`` in DDP on ``device`` (one device per rank); the parameters are broadcast from rank 0."""
    from torch.nn.parallel import DistributedDataParallel

    kwargs: _DdpOptions = {
        "gradient_as_bucket_view": settings.gradient_as_bucket_view,
        "static_graph": settings.static_graph,
    }
    if settings.bucket_cap_mb is not None:
        kwargs["bucket_cap_mb"] = settings.bucket_cap_mb
    if device.type == "cuda":
        kwargs.update({"device_ids": [device.index], "output_device": device.index})
    return DistributedDataParallel(module, **kwargs)
